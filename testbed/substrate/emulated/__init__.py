"""What every emulated substrate shares: the base that owns the fabric, the emulation clock and the
link replay (:mod:`.base`), and the movers that carry jobs and their checkpoints across it
(:mod:`.mover`: seeded ballast bytes, :mod:`.ballast_mover`, or real training agents,
:mod:`.agent_mover`). A substrate that builds its fabric differently (netns, mininet) only says how."""
