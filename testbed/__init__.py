"""testbed: trace-replay emulation testbed for geo-distributed, renewable- and power-aware ML training.

The Python API (imported on first use, so ``import testbed`` stays light)::

    import testbed
    sc = testbed.load("scenarios/quickstart.yaml", overrides={"duration_h": 12})   # validated
    res = testbed.run(sc, substrate="sim")            # or testbed.run("scenarios/quickstart.yaml")
    res.summary, res.migrations, res.jobs, res.timeseries, res.decisions, res.power
    testbed.open_results("results/quickstart-s10-...")
    testbed.sweep("sweeps/example-2x2x3.yaml")       # the statistics table as a DataFrame
    with testbed.net.up("topologies/eu-5.yaml") as wan:   # a live WAN (root): wan.exec, wan.set, wan.status
        wan.exec("rome", ["ping", "-c", "3", wan.sites["paris"]])
"""

__version__ = "0.1.0"

_API = ("load", "run", "open_results", "Results", "parse_set")

__all__ = ["__version__", "sweep", "net", *_API]


def __getattr__(name: str):
    if name in _API:
        from testbed import api

        return getattr(api, name)
    if name == "net":  # the live WAN handle: with testbed.net.up(path) as wan: ...
        import importlib

        return importlib.import_module("testbed.net")
    if name == "sweep":  # the sweep package, callable: testbed.sweep(path, ...) runs a sweep
        import importlib

        return importlib.import_module("testbed.sweep")
    raise AttributeError(f"module 'testbed' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
