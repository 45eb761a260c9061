"""The PowerTrip study on the netns substrate: every selected site's update really crosses its
shaped link (down and up), SHA-256 verified, and the measured times drive the round clock."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from testbed.federated.netns_exchange import NetnsExchange
from testbed.runner import run_scenario as run_federated
from testbed.inputs import build_inputs
from testbed.spec.load import LoadedScenario, scenario_from_dict
from tests.integration.conftest import our_namespaces
from tests.unit.federated_support import tiny

pytestmark = pytest.mark.root


def _loaded() -> LoadedScenario:
    d = tiny(max_rounds=2)
    d["emulation"] = {"time_scale": 10}
    d["policies"] = [{"name": "static_k", "k": 4}, {"name": "powertrip", "k_init": 2, "window": 1}]
    return LoadedScenario(scenario_from_dict(d), Path("tiny.yaml"), "name: fl-tiny\n", "0" * 64, None)


def test_updates_cross_the_shaped_links(tmp_path):
    out = tmp_path / "res"
    run_federated(_loaded(), out_dir=out, substrate="netns", seed=None, progress=False, force=False, argv=[],
                  plots=False)
    man = json.loads((out / "manifest.json").read_text())
    assert man["substrate"]["substrate"] == "netns"
    assert our_namespaces(man["substrate"]["run_id"]) == []  # torn down
    rows = pd.read_parquet(out / "static_k" / "sites.parquet")
    agg = rows[rows["site"] == "agg"]  # the aggregator's end of each round's transfers: energy only
    assert len(agg) == 2 and (agg["comm_kwh"] > 0).all() and not agg["comm_measured"].any()
    s = rows[rows["site"] != "agg"]
    assert s["comm_measured"].all() and len(s) == 8
    assert (s["up_s"] > 0).all() and (s["down_s"] > 0).all()
    # the 1 Gbit/s site's update takes longer than the 10 Gbit/s one's, as on the real links
    slow = s[s["site"] == "tiny"]["up_s"].mean()
    fast = s[s["site"] == "near"]["up_s"].mean()
    assert slow > 2 * fast
    summ = json.loads((out / "static_k" / "summary.json").read_text())
    assert summ["comm_measured_over_modelled"] > 0.5
    # every real transfer is a row of transfers.parquet: 2 rounds x 4 sites x down and up, as documented
    tr = pd.read_parquet(out / "static_k" / "transfers.parquet")
    assert len(tr) == 16 and summ["transfers"] == 16 and summ["comm_rounds_measured"] == 2
    assert sorted(tr["direction"].unique()) == ["down", "up"] and set(tr["site"]) == set(s["site"])
    assert (tr["sent_bytes"] > 0).all() and (tr["transfer_s"] > 0).all() and (tr["shaped_gbps"] > 0).all()
    per = tr.groupby(["round", "site"])["measured_s"].sum().sort_index()  # the round clock uses what was measured
    want = (s.set_index(["round", "site"])["down_s"] + s.set_index(["round", "site"])["up_s"]).sort_index()
    assert per.values == pytest.approx(want.values)
    assert 0.5 < summ["transfer_over_shaped_median"] < 2.0
    # each link direction keeps its connection: the first round opens them, the second reuses every one
    kept = tr.groupby("round")["kept_connection"].agg(["sum", "size"])
    assert kept["sum"].iloc[0] == 0 and kept["sum"].iloc[1] == kept["size"].iloc[1] == 8
    from tests.unit import outputs_schema as schema

    _, files = schema.load()
    assert schema.problems(out / "static_k" / "transfers.parquet", "<policy>/transfers.parquet", "federated", files) == []
    assert schema.problems(out / "static_k" / "summary.json", "<policy>/summary.json", "federated", files) == []


def test_exchange_sends_real_update_bytes():
    inp = build_inputs(_loaded().scenario)
    with NetnsExchange(inp) as ex:
        from testbed.federated.roundtime import SiteTime

        pred = {"near": SiteTime("near", 10, 1.0, 1.0, 0.1, 0.1)}
        got = ex.exchange(1, 0.0, pred, {"__global__": b"g" * 5000, "near": b"u" * 7000}, 10**9)
        assert got["near"][0] > 0 and got["near"][1] > 0
        sent = ex.take_transfers()
        sizes = {t["direction"]: t["sent_bytes"] for t in sent}
        assert sizes["down"] == sizes["up"] == ex.scaling.bytes_sent(1.0)
        assert {t["transfer_id"].rsplit(".", 1)[-1] for t in sent} == {"down", "up"}
        assert ex.take_transfers() == []  # taken once
        run_id = ex.run_id
    assert our_namespaces(run_id) == []
