"""A run of several policies opens a fresh substrate per policy: the manifest's ``substrate`` keeps
the cross-traffic and probe counts of all of them (totals, and each under ``by_policy.<label>``),
not only the last policy's (no fabric: a stand-in substrate with the emulated one's bookkeeping)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from testbed.inputs import build_inputs
from testbed.spec import scenario_from_dict
from testbed.spec.load import LoadedScenario
from testbed.studies import MigrationStudy
from testbed.studies import migration as mig
from testbed.substrate.emulated.base import EmulatedSubstrate
from tests.conftest import small_scenario_dict


class _Sub:
    """What an emulated substrate gives the study after one policy's run."""

    over_policies = staticmethod(EmulatedSubstrate.over_policies)

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def cap_target(self):
        return None

    def _xt(self):
        return [{"src": "a", "dst": "b", "what": "1 TCP flow(s)", "tcp_bytes": 1000 * self.n, "udp_bytes": 0,
                 "flows_started": 1, "flows_wanted": 1, "wall_s": 2.0, "errors": 0, "last_error": ""}]

    def _probes(self):
        return [{"t_s": 300.0 * self.n, "src": "a", "dst": "b", "wall_s": 0.5, "connect_s": 0.001 * self.n,
                 "error": "stalled" if self.n == 2 else None}]

    def describe(self):
        return {"substrate": "netns", "run_id": "mpm001", "cross_traffic": self._xt(), "cross_traffic_cautions": [],
                "probes": EmulatedSubstrate.over_policies({"x": {"cross_traffic": [], "probe_rows": self._probes()}})["probes"]}

    def policy_part(self):
        return {"cross_traffic": self._xt(), "probe_rows": self._probes()}


def test_the_manifest_keeps_every_policys_cross_traffic_and_probes(monkeypatch):
    d = small_scenario_dict(policies=[{"name": "static", "label": "s"}, {"name": "energy_only", "label": "eo"},
                                      {"name": "no_filter", "label": "nf"}])
    sc = scenario_from_dict(d)
    loaded = LoadedScenario(scenario=sc, path=Path("small.yaml"), text="", sha256="0" * 64, topology_path=None)
    made = iter(range(1, 4))
    monkeypatch.setattr(mig, "make_substrate", lambda *a: _Sub(next(made)))
    monkeypatch.setattr(mig, "power_backend", lambda sc, sub: contextlib.nullcontext(type("Caps", (), {"name": "model"})))
    monkeypatch.setattr(mig, "make_policy", lambda spec, sc: None)
    monkeypatch.setattr(mig, "Controller", lambda *a, **k: type("Ctl", (), {"run": lambda self: "record"})())
    study = MigrationStudy(loaded, substrate="netns")
    with contextlib.ExitStack() as stack:
        runs = study.start(build_inputs(sc), None, stack)
        for run in runs:
            assert study.run(run) == "record"
    desc = study.describe()
    (xt,) = desc["cross_traffic"]
    assert xt["tcp_bytes"] == 1000 + 2000 + 3000 and xt["flows_started"] == 3 and xt["wall_s"] == 6.0
    assert desc["probes"]["n"] == 3 and desc["probes"]["failed"] == 1 and desc["probes"]["connect_s_max"] == 0.003
    assert desc["probes"]["failures"] == [{"label": "eo", "t_s": 600.0, "src": "a", "dst": "b", "wall_s": 0.5,
                                           "error": "stalled"}]
    assert list(desc["by_policy"]) == ["s", "eo", "nf"]
    assert [desc["by_policy"][lb]["cross_traffic"][0]["tcp_bytes"] for lb in ("s", "eo", "nf")] == [1000, 2000, 3000]
    assert [desc["by_policy"][lb]["probes"]["n"] for lb in ("s", "eo", "nf")] == [1, 1, 1]
    assert desc["power_backend"] == "model" and desc["cross_traffic_cautions"] == []
