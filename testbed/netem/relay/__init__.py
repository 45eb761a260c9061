"""The userspace delay relay: latency, jitter and loss on a link where the kernel has no ``sch_netem``.

- :mod:`.relay`: the relay in Python, one process per link (``python -m testbed.netem.relay.relay``);
- :mod:`.relayfork`: starts many Python relays fast, forked from one process that imported it once;
- :mod:`.fastrelay`: the compiled relay (``fastrelay.c``), one process for any number of links;
- :mod:`.relaypool`: how many compiled relay processes serve a fabric's links, and which links each.

The fabric (:mod:`testbed.netem.fabric`) chooses and starts them; nothing here imports the fabric.
"""
