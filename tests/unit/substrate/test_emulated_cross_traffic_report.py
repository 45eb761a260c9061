"""What an emulated run says of its cross-traffic and probes (no root, no fabric): each entry's
generator errors in the manifest and in a warning at the end of a policy's run; the run's totals over
its policies with each policy's own under ``by_policy``; the cautions said once per run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from testbed.inputs import build_inputs
from testbed.netem.crosstraffic import XtPlan
from testbed.spec import scenario_from_dict
from testbed.substrate.emulated import base
from testbed.substrate.emulated.base import EmulatedSubstrate, cross_traffic_problems, probe_summary
from testbed.substrate.netns.substrate import NetnsSubstrate
from tests.conftest import small_scenario_dict


def _inputs():
    d = small_scenario_dict()
    d["emulation"] = {"time_scale": 100, "byte_scale": 0.001}
    return build_inputs(scenario_from_dict(d))


def _entry(tcp_bytes, **kw):
    return {"src": "a", "dst": "b", "what": "2 TCP flow(s)", "tcp_bytes": tcp_bytes, "udp_bytes": 0,
            "flows_started": kw.get("flows_started", 2), "flows_wanted": kw.get("flows_wanted", 2), "wall_s": 1.0,
            "errors": kw.get("errors", 0), "last_error": kw.get("last_error", "")}


def _probe(t_s, connect_s, error=None):
    return {"t_s": t_s, "src": "a", "dst": "b", "wall_s": 0.5, "connect_s": connect_s, "error": error}


def test_the_runs_totals_are_over_every_policy_and_each_policy_keeps_its_own():
    parts = {"static": {"cross_traffic": [_entry(100)], "probe_rows": [_probe(0, 0.001), _probe(300, 0.003)]},
             "eo": {"cross_traffic": [_entry(50, errors=3, last_error="reset")], "probe_rows": []},
             "fa": {"cross_traffic": [_entry(7)], "probe_rows": [_probe(600, None, "no connection")]}}
    got = EmulatedSubstrate.over_policies(parts)
    (tot,) = got["cross_traffic"]
    assert tot["tcp_bytes"] == 157 and tot["flows_started"] == 6 and tot["wall_s"] == 3.0 and tot["errors"] == 3
    assert tot["last_error"] == "eo: reset" and tot["what"] == "2 TCP flow(s)"
    p = got["probes"]
    assert p["n"] == 3 and p["failed"] == 1 and p["connect_s_median"] == 0.002 and p["connect_s_max"] == 0.003
    assert p["failures"] == [{"label": "fa", "t_s": 600, "src": "a", "dst": "b", "wall_s": 0.5, "error": "no connection"}]
    assert list(got["by_policy"]) == ["static", "eo", "fa"]
    assert got["by_policy"]["static"]["cross_traffic"][0]["tcp_bytes"] == 100
    assert got["by_policy"]["static"]["probes"]["n"] == 2 and got["by_policy"]["eo"]["probes"] is None
    assert got["by_policy"]["fa"]["probes"]["failures"][0]["error"] == "no connection"
    assert probe_summary([]) is None


def test_a_generator_with_errors_or_no_flow_is_named_in_one_line():
    assert cross_traffic_problems([_entry(100)]) is None
    assert cross_traffic_problems([_entry(0, flows_started=0, flows_wanted=0)]) is None  # a trace at 0 flows
    line = cross_traffic_problems([_entry(100), _entry(0, flows_started=0, errors=2,
                                                       last_error="congestion control 'nosuchcc' cannot be set")])
    assert "\n" not in line and line.count("cross_traffic[1] a -> b") == 1 and "cross_traffic[0]" not in line
    assert "cross_traffic[1] a -> b: opened none of the TCP flows" in line and "2 error(s)" in line and "nosuchcc" in line
    assert "wrote no counters" in cross_traffic_problems([{"src": "a", "dst": "b", "tcp_bytes": None}])


class _Fabric:
    def __init__(self, stats):
        self.plan = SimpleNamespace(cross_traffic=(XtPlan(0, "a", "b", "{}", "2 TCP flow(s)"),), links=())
        self._stats = stats
        self.downs = 0

    def cross_traffic_stats(self):
        return [dict(self._stats, role="send", index=0, src="a", dst="b")]

    def down(self):
        self.downs += 1


@pytest.mark.parametrize("stats, warned", [
    ({"tcp_bytes": 0, "udp_bytes": 0, "flows": 0, "flows_started": 0, "flows_wanted": 2, "wall_s": 1.0, "errors": 2,
      "last_error": "congestion control 'nosuchcc' cannot be set: No such file or directory"}, True),
    ({"tcp_bytes": 10, "udp_bytes": 0, "flows": 2, "flows_started": 2, "flows_wanted": 2, "wall_s": 1.0, "errors": 0,
      "last_error": ""}, False)])
def test_the_end_of_a_policys_run_warns_of_a_generator_that_failed(capsys, stats, warned):
    sub = NetnsSubstrate(_inputs(), run_id="xtw001")
    sub.fabric = _Fabric(stats)
    sub.clock = object()  # the run got going
    assert sub._cross_traffic_summary()[0]["errors"] == stats["errors"]  # the manifest's entry carries them
    assert sub._cross_traffic_summary()[0]["last_error"] == (stats["last_error"] or None)
    sub.close()
    sub.close()  # idempotent: said once
    err = capsys.readouterr().err
    assert err.count("warning: ") == (1 if warned else 0), err
    if warned:
        assert "cross_traffic[0] a -> b" in err and "nosuchcc" in err and "Traceback" not in err


def test_the_cautions_are_said_once_per_run_not_once_per_policy(monkeypatch, capsys):
    monkeypatch.setattr(base, "resolve_impairment", lambda req: "relay")
    monkeypatch.setattr(base, "plan_wan", lambda *a, **k: (SimpleNamespace(time_scale=100), None))
    monkeypatch.setattr(base, "cautions", lambda *a: ["cross_traffic a -> b: short moves"])

    class Stop(Exception):
        pass

    def make_fabric(self, plan):
        raise Stop  # nothing further is needed: the cautions come before the fabric

    monkeypatch.setattr(NetnsSubstrate, "make_fabric", make_fabric)
    said = []
    for run_id in ("xtc001", "xtc001", "xtc001", "xtc002"):  # a run of three policies, then another run
        sub = NetnsSubstrate(_inputs(), run_id=run_id)
        with pytest.raises(Stop):
            sub.open()
        assert sub._cautions == ["cross_traffic a -> b: short moves"]  # the manifest keeps them every time
        said.append(capsys.readouterr().err.count("caution: cross_traffic a -> b"))
    assert said == [1, 0, 0, 1]


def test_long_lived_flows_share_what_udp_and_poisson_leave_at_the_lowest_rate():
    """Each entry's long-lived flows should carry at least their share beside one transfer: 3 flows of
    4 on the direction's rate less its UDP and Poisson load; entries without such flows get none."""
    import json

    from testbed.netem.crosstraffic import long_lived_share_mbit

    xts = [XtPlan(0, "a", "b", json.dumps({"tcp_flows": 3, "udp_bps": 40e6}), "3 TCP flow(s)"),
           XtPlan(1, "a", "b", json.dumps({"poisson": {"rate_per_wall_s": 10.0, "mean_bytes": 1e6}}), "Poisson"),
           XtPlan(2, "b", "a", json.dumps({"tcp_flows": 1}), "1 TCP flow(s)"),
           XtPlan(3, "a", "c", json.dumps({"tcp_flows": 1}), "no link known")]
    share = long_lived_share_mbit(xts, {("a", "b"): 400.0, ("b", "a"): 100.0})
    assert share == pytest.approx({0: 3 / 4 * (400 - 40 - 80), 2: 1 / 2 * 100})


def test_flows_that_carried_far_less_than_their_share_are_named():
    """The emulation underdelivered (a direction starved on a busy host): the warning says so."""
    assert cross_traffic_problems([_entry(100) | {"carried_frac": 0.9}]) is None
    line = cross_traffic_problems([_entry(100) | {"carried_frac": 0.06}])
    assert "cross_traffic[0] a -> b" in line and "carried 6% of their share" in line
    assert cross_traffic_problems([_entry(100) | {"carried_frac": None}]) is None  # not judged (too short)
