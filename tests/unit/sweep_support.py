"""Small sweep files for the sweep tests: a 12-hour, two-policy scenario and a 2 x 2 x 3 grid."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import small_scenario_dict

GRID_2X2 = {
    "traces.bandwidth.steady_degradation_pct": [0, 50],
    "feasibility.alpha, policies[feasibility_aware].alpha": [0.05, 0.2],
}


def tiny_scenario(**overrides) -> dict:
    """Seconds per run: 12 h, two sites, two policies. Curtailment windows are seeded, so seeds differ."""
    return small_scenario_dict(name="tiny", duration_h=12, policies=["static", "feasibility_aware"], **overrides)


def write_sweep(folder: Path, sweep: dict | None = None, scenario: dict | None = None,
                name: str = "sweep.yaml") -> Path:
    """Write ``scenario.yaml`` and a sweep file beside it; returns the sweep file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario or tiny_scenario(), sort_keys=False))
    body = {"scenario": "scenario.yaml", "seeds": 3, "grid": GRID_2X2}
    body.update(sweep or {})
    path = folder / name
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path
