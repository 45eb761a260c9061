"""The paper scenario on sim: all four policies, and the seed's headline direction."""

from __future__ import annotations

from testbed.analysis.summary import summarize
from testbed.spec import load_scenario
from tests.conftest import ROOT, run_policies


def test_feasibility_aware_uses_less_non_renewable_than_static():
    sc = load_scenario(ROOT / "scenarios" / "paper-migration-5node-7day.yaml").scenario
    tables = run_policies(sc)
    assert list(tables) == ["static", "placement_only", "energy_only", "feasibility_aware", "feasibility_aware_paper",
                            "no_filter"]
    s = {lb: summarize(t, policy=lb, label=lb) for lb, t in tables.items()}
    assert s["feasibility_aware"]["grid_kwh"] < s["static"]["grid_kwh"]
    assert s["energy_only"]["grid_kwh"] < s["static"]["grid_kwh"]
    assert s["static"]["migrations"] == 0 and s["feasibility_aware"]["migrations"] > 0
    assert s["placement_only"]["migrations"] == 0 and s["placement_only"]["grid_kwh"] < s["static"]["grid_kwh"]
    # same arrivals for everyone
    assert len({v["jobs_total"] for v in s.values()}) == 1
