"""Node agents: one per site, driven over the management network with a per-run token."""
