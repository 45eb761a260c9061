"""Network emulation: the primitives (namespaces and entering them, qdiscs, routes, offloads, BIG TCP,
congestion control, a path probe) and the fabric built from them (plan, links, scaling, live
changes, cross-traffic and its generator).

Two subpackages: :mod:`testbed.netem.relay`, the userspace delay relay that stands in for
``sch_netem``, and :mod:`testbed.netem.owned`, what a run owns on the host (names from its run id,
its state file) and ``testbed clean``, which removes exactly that.
"""
