"""``testbed net up FILE`` names FILE first in each problem of it, as ``validate`` and ``run`` do
(nothing is built: the file is refused before any network comes up)."""

from __future__ import annotations

import pytest
import yaml

from testbed.cli import main

SCENARIO = {
    "name": "xt", "duration_h": 12,
    "sites": [{"name": s, "lat_deg": 45.0 + i, "lon_deg": 9.0, "nodes": 2} for i, s in enumerate("abc")],
    "links": [{"a": "a", "b": "b", "bandwidth_gbps": 1, "latency_ms": 20}],
    "traces": {"renewable": {"default": {"kind": "solar", "capacity_kw": 3.0}}},
    "workloads": {"jobs": [{"id": "j1", "checkpoint_gb": 4, "work_gpu_h": 6, "origin": "a"}]},
    "policies": ["no_filter"],
    "cross_traffic": [{"src": "a", "dst": "b", "tcp": {"flows": 1}}, {"src": "a", "dst": "c", "tcp": {"flows": 1}}],
}


@pytest.fixture
def no_network(monkeypatch):
    """``net up`` without root and without building anything."""
    import testbed.net.held as held
    import testbed.netem.fabric as fabric

    def refuse(*a, **k):
        raise AssertionError("a network was about to be built")

    monkeypatch.setattr(fabric, "require_root", lambda what: None)
    monkeypatch.setattr(fabric, "Fabric", refuse)
    monkeypatch.setattr(held, "resolve", lambda impairment: "none")


@pytest.mark.parametrize("replay", [False, True])
def test_net_up_names_the_file_like_validate(tmp_path, capsys, no_network, replay):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    assert main(["validate", str(path)]) == 2
    expected = capsys.readouterr().err.strip().splitlines()
    assert expected == [f"error: {path}: cross_traffic[1]: no link joins a and c (cross-traffic runs on one link's "
                        "direction)"]
    assert main(["net", "up", str(path), *(["--replay"] if replay else [])]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == expected and "Traceback" not in err


def test_a_flag_problem_is_not_put_under_the_file(tmp_path, capsys, no_network):
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump({"sites": SCENARIO["sites"], "links": SCENARIO["links"]}))
    assert main(["net", "up", str(path), "--replay"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --replay: {path} is a topology file: replay needs a scenario (its bandwidth traces)"]
