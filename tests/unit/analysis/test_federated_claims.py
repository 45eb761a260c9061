"""The PowerTrip claims over seeds: censored runs counted, chosen baselines chosen on other seeds,
and 'reproduced' only with the paper's number in the CI (the migration study's verdict rule)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from testbed.analysis import federated_claims as fc
from testbed.analysis.validation import Run

MAX_H = 3.0


def _summary(policy, tta_h, *, clock="straggler", k=None, end_h=MAX_H):
    reached = tta_h is not None and math.isfinite(tta_h)
    s = {"policy": policy, "round_time": clock, "reached": reached, "time_to_accuracy_s": tta_h * 3600.0 if reached else None,
         "end_time_s": (tta_h if reached else end_h) * 3600.0}
    if k is not None:
        s["k"] = k
    return s


def _set(per_seed: list[dict], scenario="pt"):
    """per_seed[i]: {label: summary} of seed i -> (runs, comparisons)."""
    runs = [Run(path=None, substrate="sim", seed=100 + i, scenario=scenario, cell="", params={},
                resolved={"federated": {"aggregator": "agg", "max_hours": MAX_H}}) for i in range(len(per_seed))]
    return runs, [{"policies": p, "claims": {}} for p in per_seed]


def _row(table, claim):
    return table[table["claim"] == claim].iloc[0]


def _pt_vs_k70(pt_h, k70_h):
    return _set([{"powertrip": _summary("powertrip", a), "static_k-k70": _summary("static_k", b, k=70)}
                 for a, b in zip(pt_h, k70_h)])


def test_verdicts_over_ten_seeds():
    g = np.random.default_rng(0)
    base = 1.0 + g.normal(0, 0.05, 10)
    t = fc.claims_table(*_pt_vs_k70(base * 0.56 * (1 + g.normal(0, 0.03, 10)), base))  # ~44 % faster
    assert _row(t, fc.CLAIM_K70)["verdict"] == "reproduced"
    assert _row(t, fc.CLAIM_BEST_STATIC)["verdict"] == "reproduced"  # the only static k: chosen on both folds
    weaker = fc.claims_table(*_pt_vs_k70(base * 0.8 * (1 + g.normal(0, 0.03, 10)), base))
    assert _row(weaker, fc.CLAIM_K70)["verdict"] == "same direction, weaker"
    same = fc.claims_table(*_pt_vs_k70(base * (1 + g.normal(0, 0.05, 10)), base))
    assert _row(same, fc.CLAIM_K70)["verdict"].startswith("not reproduced (no significant difference from the baseline")


def test_few_seeds_are_not_judged():
    t = fc.claims_table(*_pt_vs_k70([0.5, 0.55, 0.52], [1.0, 1.0, 0.9]))
    assert _row(t, fc.CLAIM_K70)["verdict"].startswith("not enough seeds (n=3<10")


def test_a_censored_run_counts_and_dropping_it_would_change_the_verdict():
    """PowerTrip is 44 % faster on the 10 seeds where it reaches the target and never reaches it on the
    other 10: dropping those (as a mean over reached runs does) says reproduced; counting them does not."""
    g = np.random.default_rng(1)
    base = 1.0 + g.normal(0, 0.05, 20)
    pt = np.where(np.arange(20) % 2 == 0, base * 0.56 * (1 + g.normal(0, 0.03, 20)), np.nan)
    t = fc.claims_table(*_pt_vs_k70(pt, base))
    row = _row(t, fc.CLAIM_K70)
    assert row["seeds"] == 20 and row["reached (PowerTrip / baseline)"] == "10/20 / 20/20"
    assert row["horizon tau h"] == MAX_H and not row["verdict"].startswith(("reproduced", "not enough"))
    assert row["verdict"].startswith("not reproduced") and row["mean"].startswith("-")  # slower once counted
    reached = ~np.isnan(pt)
    dropped = fc.claims_table(*_pt_vs_k70(pt[reached], base[reached]))
    assert _row(dropped, fc.CLAIM_K70)["verdict"] == "reproduced"


def test_a_run_stopped_early_sets_the_horizon():
    """A run that stopped at 1.2 h (max_rounds) without the target: min(T, tau) is known only up to 1.2 h."""
    pt = [0.5] * 10
    k70 = [2.0] * 9 + [None]
    runs, comps = _pt_vs_k70(pt, [1.0] * 10)
    for c, h in zip(comps, k70):
        c["policies"]["static_k-k70"] = _summary("static_k", h, k=70, end_h=1.2)
    row = _row(fc.claims_table(runs, comps), fc.CLAIM_K70)
    assert row["horizon tau h"] == 1.2 and row["reached (PowerTrip / baseline)"] == "10/10 / 9/10"
    assert row["mean"] == f"{100 * (1 - 0.5 / 1.2):+.1f} %"  # every baseline time restricted to 1.2 h


def test_best_static_k_is_chosen_on_the_other_fold():
    """k10 is fastest on fold A's seeds (even positions), k20 on fold B's: each fold is judged against
    the other fold's choice."""
    per_seed = []
    for i in range(10):
        a = i % 2 == 0
        per_seed.append({"powertrip": _summary("powertrip", 0.5),
                         "static_k-k10": _summary("static_k", 0.6 if a else 1.5, k=10),
                         "static_k-k20": _summary("static_k", 1.5 if a else 0.6, k=20)})
    row = _row(fc.claims_table(*_set(per_seed)), fc.CLAIM_BEST_STATIC)
    assert row["baseline (fold A / fold B)"] == "static_k-k20 / static_k-k10"
    assert row["mean"] == f"{100 * (1 - 0.5 / 1.5):+.1f} %"  # judged against the k that lost on its own seeds
    weakest = _row(fc.claims_table(*_set(per_seed)), fc.CLAIM_UP_TO)
    assert weakest["baseline (fold A / fold B)"] == "static_k-k10 / static_k-k20"


def test_every_policy_under_every_clock_in_the_policy_table():
    per_seed = []
    for i in range(4):
        p = {}
        for clock, suffix in (("straggler", ""), ("pooled", "-pooled")):
            p[f"powertrip{suffix}"] = _summary("powertrip", 0.5 + 0.01 * i, clock=clock)
            for k in (5, 70):
                p[f"static_k{suffix}-k{k}"] = _summary("static_k", 0.7, clock=clock, k=k)
        per_seed.append(p)
    t = fc.policy_table(*_set(per_seed))
    pooled = t[t["clock"] == "pooled"]
    assert set(pooled["policy"]) == {"powertrip-pooled", "static_k-pooled-k5", "static_k-pooled-k70"}
    assert set(t[t["clock"] == "straggler"]["policy"]) == {"powertrip", "static_k-k5", "static_k-k70"}


def test_km_median_and_restricted_mean_agree_with_scipy():
    g = np.random.default_rng(2)
    tta = g.uniform(0.2, 2.5, 12)
    tta[[1, 4, 7]] = np.nan  # three runs stopped at max_hours without the target
    c = fc.Censored(np.arange(12), tta, np.where(np.isnan(tta), MAX_H, tta))
    med, lo, hi = fc.km_median(c)
    sf = sps.ecdf(sps.CensoredData(uncensored=tta[~np.isnan(tta)], right=[MAX_H] * 3)).sf
    assert sf.evaluate(med) <= 0.5 < sf.evaluate(med - 1e-9)
    assert lo <= med <= hi
    # restricted mean at tau = max_hours: the integral of the Kaplan-Meier curve up to tau
    grid = np.linspace(0, MAX_H, 300001)
    assert c.restricted_h(MAX_H).mean() == pytest.approx(np.trapezoid(sf.evaluate(grid), grid), abs=1e-4)
    none = fc.Censored(np.arange(3), np.full(3, np.nan), np.full(3, MAX_H))
    assert fc.km_median(none) == (math.inf, math.inf, math.inf)


def test_migration_runs_are_not_federated(tmp_path):
    run = Run(path=tmp_path, substrate="sim", seed=0, scenario="m", cell="", params={}, resolved={"federated": None})
    assert not fc.is_federated(run) and fc.markdown([run], [None]) == []


def test_energy_rows_pair_the_runs_energy_and_refuse_early_stops():
    g = np.random.default_rng(3)
    per_seed = []
    for i in range(10):
        pt = {**_summary("powertrip", 0.5), "energy_kwh": 10.0 + g.normal(0, 0.2), "grid_kwh": 2.0 + g.normal(0, 0.1)}
        k70 = {**_summary("static_k", 1.0, k=70), "energy_kwh": 10.0 + g.normal(0, 0.2), "grid_kwh": 4.0 + g.normal(0, 0.1)}
        per_seed.append({"powertrip": pt, "static_k-k70": k70})
    t = fc.claims_table(*_set(per_seed))
    grid = t[t["claim"].str.startswith("PowerTrip vs static k = 70: grid energy")].iloc[0]
    assert grid["verdict"] == "lower than the baseline" and -55 < float(grid["mean"].split()[0]) < -45
    energy = t[t["claim"].str.startswith("PowerTrip vs static k = 70: energy")].iloc[0]
    assert energy["verdict"].startswith("no significant effect")
    per_seed[0]["static_k-k70"] = {**_summary("static_k", None, k=70, end_h=1.0), "energy_kwh": 5.0, "grid_kwh": 1.0}
    t = fc.claims_table(*_set(per_seed))
    grid = t[t["claim"].str.startswith("PowerTrip vs static k = 70: grid energy")].iloc[0]
    assert grid["verdict"].startswith("not comparable")  # that run's energy stops short of max_hours


def test_the_report_draws_time_to_accuracy_over_seeds(tmp_path):
    runs, comps = _pt_vs_k70([0.5, 0.6, None, 0.55], [1.0, 1.1, 0.9, None])
    lines = fc.markdown(runs, comps, tmp_path)
    figs = sorted(p.name for p in tmp_path.glob("tta_km_*.png"))
    assert figs and all(f"]({f})" in "\n".join(lines) for f in figs)
    assert any("3/4" in line for line in lines)  # PowerTrip reached on 3 of 4 seeds: counted, not dropped


def test_grid_energy_the_baselines_did_not_use_is_not_measured_and_prints_no_number():
    """A baseline with no grid energy on any seed: no relative change exists, so the row has no mean,
    no CI and no p-value; one seed of the baseline at 0 kWh no longer hides a measurable change."""
    g = np.random.default_rng(4)
    per_seed = [{"powertrip": {**_summary("powertrip", 0.5), "energy_kwh": 10.0, "grid_kwh": 1.0 + g.uniform(0, 1)},
                 "static_k-k70": {**_summary("static_k", 1.0, k=70), "energy_kwh": 10.0, "grid_kwh": 0.0}}
                for _ in range(10)]
    grid = lambda t: t[t["claim"].str.startswith("PowerTrip vs static k = 70: grid energy")].iloc[0]  # noqa: E731
    row = grid(fc.claims_table(*_set(per_seed)))
    assert row["verdict"].startswith("not measured (the baselines used none")
    assert (row["mean"], row["95 % CI"], row["paired test (t p / Wilcoxon p)"]) == ("-", "-", "-")
    for i, p in enumerate(per_seed):
        p["static_k-k70"]["grid_kwh"] = 0.0 if i == 0 else 3.0 + g.uniform(0, 1)
    row = grid(fc.claims_table(*_set(per_seed)))
    assert row["verdict"] == "lower than the baseline"


def test_an_energy_change_interval_never_falls_below_minus_100_percent():
    """Per-seed changes near -100 % with one large outlier: their t-interval crosses -100 %, which no
    energy can; the ratio-of-means interval stays above it and holds the ratio of the means."""
    from testbed.stats import ratio_change_interval, t_interval

    b = np.array([1.0, 1.2, 0.9, 1.1, 1.0, 0.05, 1.3, 0.95, 1.05, 1.0])
    a = np.array([0.02, 0.03, 0.01, 0.02, 0.04, 0.2, 0.02, 0.03, 0.01, 0.02])
    assert t_interval(100 * (a / b - 1)).lo < -100
    ci = ratio_change_interval(a, b)
    assert -100 <= ci.lo <= ci.mean <= ci.hi and ci.mean == pytest.approx(100 * (a.mean() / b.mean() - 1))
    assert ratio_change_interval(a, np.zeros(10)) is None
    same = ratio_change_interval(2 * b, b)
    assert (same.lo, same.mean, same.hi) == pytest.approx((100.0, 100.0, 100.0))
    assert ratio_change_interval(a, b) == ci  # a fixed stream: the report re-derives the same interval


def test_a_policy_that_never_trained_is_no_baseline():
    """A fixed radius that covers no site trains no round and never reaches the target: chosen as the
    weakest baseline it would make 'up to 50 %' look reproduced by construction. It is left out, and
    the report says so."""
    g = np.random.default_rng(5)
    per_seed = []
    for i in range(10):
        k = 1.0 + g.normal(0, 0.05)
        per_seed.append({"powertrip": {**_summary("powertrip", 0.6 * k), "rounds_trained": 12},
                         "static_k-k10": {**_summary("static_k", k, k=10), "rounds_trained": 20},
                         "fixed_radius": {**_summary("fixed_radius", None), "rounds_trained": 0}})
    runs, comps = _set(per_seed)
    row = _row(fc.claims_table(runs, comps), fc.CLAIM_UP_TO)
    assert row["baseline (fold A / fold B)"] == "static_k-k10"
    assert 30 < float(row["mean"].split()[0]) < 50  # against the baseline that trained: ~40 %
    text = "\n".join(fc.markdown(runs, comps))
    assert "Left out as baselines" in text and "`fixed_radius`" in text
    per_seed[3]["fixed_radius"]["rounds_trained"] = 1  # it trained once: a (weak) baseline after all
    assert _row(fc.claims_table(*_set(per_seed)), fc.CLAIM_UP_TO)["baseline (fold A / fold B)"] == "fixed_radius"


def test_grid_energy_at_rounding_level_is_none():
    """Grid energy of 1e-16 kWh (a total minus its renewable part) is none: no relative change is
    claimed from rounding."""
    g = np.random.default_rng(6)
    per_seed = [{"powertrip": {**_summary("powertrip", 0.5), "energy_kwh": 10.0, "grid_kwh": g.uniform(0, 2e-16)},
                 "static_k-k70": {**_summary("static_k", 1.0, k=70), "energy_kwh": 10.0, "grid_kwh": g.uniform(0, 2e-16)}}
                for _ in range(10)]
    row = fc.claims_table(*_set(per_seed))
    row = row[row["claim"].str.startswith("PowerTrip vs static k = 70: grid energy")].iloc[0]
    assert row["verdict"].startswith("not measured (neither used any") and row["mean"] == "-"
