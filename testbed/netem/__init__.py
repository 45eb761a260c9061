"""Network-emulation primitives: names, namespaces, qdiscs, the delay relay, capability probes.

Every live resource is named from a run id (``tb-<run>-...`` for namespaces, ``tb<run>...`` for
interfaces) so that cleanup finds exactly what one run created, and nothing else.
"""
