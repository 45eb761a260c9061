"""testbed: trace-replay emulation testbed for geo-distributed, renewable- and power-aware ML training.

The Python API (imported on first use, so ``import testbed`` stays light)::

    import testbed
    sc = testbed.load("scenarios/quickstart.yaml", overrides={"duration_h": 24})   # validated
    res = testbed.run(sc, substrate="sim")            # or a path, or a dict as a scenario file holds it
    res.summary, res.migrations, res.jobs, res.timeseries, res.decisions, res.power
    table = testbed.sweep(sc, grid={"policies[feasibility_aware].alpha": [0.1, 0.2]}, seeds=range(3))
    sw = testbed.open(table.attrs["path"])           # a run's or a sweep's directory
    sw.summary, sw.timeseries                         # every trial's, with run_id, cell, seed, policy, label
    testbed.compare(run_a, run_b)                     # scenario differences and per-metric changes, paired by seed
    with testbed.net.up("topologies/eu-5.yaml") as wan:   # a live WAN (root): wan.exec, wan.set, wan.status
        wan.exec("rome", ["ping", "-c", "3", wan.sites["paris"]])
"""

__version__ = "0.1.0"

_API = ("load", "run", "open_results", "Results", "parse_set", "compare")
_ALIASES = {"open": "open_results", "_sweep": "sweep"}  # _sweep: what testbed.sweep(...) calls

__all__ = ["__version__", "sweep", "net", "open", *_API]


def __getattr__(name: str):
    if name in _API or name in _ALIASES:
        from testbed import api

        return getattr(api, _ALIASES.get(name, name))
    if name == "net":  # the live WAN handle: with testbed.net.up(path) as wan: ...
        import importlib

        return importlib.import_module("testbed.net")
    if name == "sweep":  # the sweep package, callable: testbed.sweep(source, ...) runs a sweep
        import importlib

        return importlib.import_module("testbed.sweep")
    raise AttributeError(f"module 'testbed' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
