"""A small validation sweep on sim: cross-traffic load x the predictor's bandwidth basis (issue #33).

``python -m testbed.crosstraffic.sweep [--seeds N] [--scenario FILE] [--out CSV]`` runs the scenario
(default: the quick start, ballast nodes) under four loads on every link direction, each policy
entry ``feasibility_aware`` with ``bandwidth_basis`` nominal, fair_share and probe, and prints per
load and basis: completed migrations, the median over seeds of each run's median |predicted /
actual transfer time - 1|, and overruns (Eq. 1 violated in reality).

Loads (per direction of a link of B Gbit/s): ``none``; ``light``: 1 TCP flow; ``heavy``: 3 TCP flows
and UDP at 0.1 B; ``bursty``: 4 on/off flows (600 s on, 1800 s off) and Poisson flows of Pareto(1.5)
sizes, mean 200 MB, 0.2 B arrivals per second (offered load 0.32 B).

On sim the truth is the fair-share model itself and the probe is that share x lognormal noise
(sigma 10 %): what this measures is how far the nominal rate is from a transfer's share, not the
model's own error (the netns runs in docs/how-to/cross-traffic.md measure that). Not the reference
results' sweep: no netns seeds.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

LOADS = ("none", "light", "heavy", "bursty")
BASES = ("nominal", "fair_share", "probe")


def load_entries(links: list[tuple[str, str, float]], load: str) -> list[dict]:
    out: list[dict] = []
    for a, b, gbps in links:
        for s, d in ((a, b), (b, a)):
            if load == "light":
                out.append({"src": s, "dst": d, "tcp": {"flows": 1}})
            elif load == "heavy":
                out.append({"src": s, "dst": d, "tcp": {"flows": 3}, "udp": {"rate_gbps": 0.1 * gbps}})
            elif load == "bursty":
                out.append({"src": s, "dst": d, "on_off": {"flows": 4, "on_s": 600, "off_s": 1800},
                            "poisson": {"arrivals_per_s": 0.2 * gbps, "mean_size_mb": 200, "pareto_shape": 1.5}})
            elif load != "none":
                raise ValueError(f"unknown load {load!r} (loads: {', '.join(LOADS)})")
    return out


def sweep(scenario: dict, seeds, loads=LOADS):
    """One row per load, seed and basis; and the table per load and basis."""
    import numpy as np
    import pandas as pd

    import testbed

    links = [(lk["a"], lk["b"], lk["bandwidth_gbps"]) for lk in scenario["links"]]
    rows = []
    for load in loads:
        for seed in seeds:
            d = copy.deepcopy(scenario)
            d["seed"] = seed
            d["cross_traffic"] = load_entries(links, load)
            d["policies"] = [{"name": "feasibility_aware", "label": b, "bandwidth_basis": b} for b in BASES]
            m = testbed.run(d, substrate="sim", plots=False, progress=False).migrations
            for b in BASES:
                x = m[(m.label == b) & (m.status == "completed")]
                err = (x.predicted_transfer_s / x.outcome_transfer_s - 1).abs()
                rows.append({"load": load, "seed": seed, "basis": b, "migrations": len(x),
                             "median_abs_err": float(err.median()) if len(x) else np.nan,
                             "overruns": int(x.overran.astype("boolean").fillna(False).sum())})
    df = pd.DataFrame(rows)
    table = (df.groupby(["load", "basis"], sort=False)
             .agg(migrations=("migrations", "sum"), median_abs_err=("median_abs_err", "median"),
                  overruns=("overruns", "sum")).reset_index())
    return df, table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.crosstraffic.sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--scenario", default=None, help="a scenario file (default: the quick start)")
    ap.add_argument("--out", default=None, help="write the per-run rows to this CSV")
    a = ap.parse_args(argv)
    from testbed.spec.load import read_yaml

    path = Path(a.scenario) if a.scenario else Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
    doc = read_yaml(path, "scenario file")
    doc.setdefault("emulation", {})["nodes"] = "ballast"
    rows, table = sweep(doc, range(a.seeds))
    if a.out:
        rows.to_csv(a.out, index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
