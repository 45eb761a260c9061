"""What a live run owns on this host, and how it is removed again — only what the run made.

- :mod:`.naming`: every live resource is named from a run id (``tb-<run>-...`` for namespaces,
  ``tb<run>...`` for interfaces), so that cleanup finds exactly what one run created;
- :mod:`.state`: the run's state file, which lists every live resource *before* it is created;
- :mod:`.hostdirs`: host directories a run may own beside its namespaces (a private engine's), and
  how to detach the mounts under them;
- :mod:`.clean`: ``testbed clean``, which removes what a valid state file lists, and nothing else.
"""
