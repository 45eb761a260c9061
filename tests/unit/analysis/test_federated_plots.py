"""The PowerTrip figures stay readable: at most six runs per panel, one colour per role, one panel per
clock; the report's time-to-accuracy figure counts censored runs."""

from __future__ import annotations

from testbed.analysis import federated_plots as fp


def _summaries():
    s = {}
    for clock, suffix in (("straggler", ""), ("pooled", "-pooled")):
        s[f"powertrip{suffix}"] = {"policy": "powertrip", "round_time": clock, "time_to_accuracy_s": 900.0}
        for k, t in ((5, None), (10, 700.0), (20, 800.0), (40, 1200.0), (70, 2000.0), (100, 2500.0)):
            s[f"static_k{suffix}-k{k}"] = {"policy": "static_k", "round_time": clock, "k": k, "time_to_accuracy_s": t}
        for name in ("random", "fixed_radius", "centralized"):
            s[f"{name}{suffix}"] = {"policy": name, "round_time": clock, "time_to_accuracy_s": 3000.0}
    s["static_k"] = {"policy": "static_k", "round_time": "straggler", "best_of": ["static_k-k10"]}
    return s


def test_at_most_six_runs_a_panel_with_distinct_colours():
    s = _summaries()
    for clock, suffix in (("straggler", ""), ("pooled", "-pooled")):
        shown = fp.shown(s, clock)
        labels = [lb for lb, _, _ in shown]
        assert len(shown) == fp.MAX_LINES and len({c for _, _, c in shown}) == len(shown)
        assert labels[0] == f"powertrip{suffix}" and labels[1] == f"static_k{suffix}-k10"  # the fastest static k
        assert f"static_k{suffix}-k70" in labels and "static_k" not in labels  # k = 70; never the best-of copy
        assert all(s[lb]["round_time"] == clock for lb in labels)
    assert fp._clocks(s) == ["straggler", "pooled"]
