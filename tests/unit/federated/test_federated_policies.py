import math

import numpy as np
import pytest

from testbed.federated.policies.centralized import CentralizedPolicy
from testbed.federated.policies.fixed_radius import FixedRadiusPolicy
from testbed.federated.policies.powertrip import PowerTripPolicy
from testbed.federated.policies.random import RandomPolicy
from testbed.federated.policies.static_k import StaticKPolicy
from testbed.federated.projection import project_gain
from testbed.federated.roundtime import RoundTimeModel, SiteTime
from testbed.federated.score import ranked, score, weights
from testbed.federated.view import RoundView, SiteView
from testbed.spec.federated import Centralized, FixedRadius, PowerTrip, RandomK, StaticK

# name: (miles, effective kW, capacity, compute s, comm s)
SITES = {
    "a": (300, 5.0, 10.0, 10.0, 2.0),
    "b": (800, 4.0, 8.0, 12.0, 2.0),
    "c": (1500, 6.0, 12.0, 9.0, 20.0),
    "d": (2500, 1.0, 2.0, 60.0, 8.0),
    "e": (100, 0.0, 0.0, math.inf, 1.0),   # no power: unusable
}


def make_view(accuracy=0.5, round_=2, update_gb=1.0, seed=0) -> RoundView:
    sites = {n: SiteView(n, 10, miles, kw, kw, cap, 10.0, SiteTime(n, 10, cap, comp, comm / 2, comm / 2))
             for n, (miles, kw, cap, comp, comm) in SITES.items()}
    model = RoundTimeModel("straggler", epochs=1, data_scale=1.0, samples_per_s=1.0, total_samples=50)
    return RoundView(round_, 0.0, accuracy, sites, "agg", update_gb, model, [], np.random.default_rng(seed))


def test_weights_follow_update_size():
    assert weights(1.0) == (0.5, 0.5)
    w_p, w_c = weights(2.0)
    assert w_c == pytest.approx(2 / 3) and w_p == pytest.approx(1 / 3)
    assert weights(0.0) == (1.0, 0.0)


def test_score_is_weighted_log_power_over_delay():
    v = make_view().sites["a"]
    assert score(v, 0.5, 0.5) == pytest.approx(0.5 * math.log(5.0) - 0.5 * math.log(2.0))
    assert score(make_view().sites["e"], 0.5, 0.5) == -math.inf


def test_ranking_moves_from_power_to_delay_with_update_size():
    assert ranked(make_view(update_gb=0.0))[:3] == ["c", "a", "b"]      # power only
    assert ranked(make_view(update_gb=1000.0))[:3] == ["a", "b", "d"]   # delay only
    assert "e" not in ranked(make_view())


def test_random_is_seeded_and_uses_only_usable_sites():
    p = RandomPolicy("random", RandomK(name="random", k=3))
    a, b = p.select(make_view(seed=1)), p.select(make_view(seed=1))
    assert a.sites == b.sites and len(a.sites) == 3 and "e" not in a.sites
    assert len(p.select(make_view()).sites) == 3
    big = RandomPolicy("random", RandomK(name="random", k=10)).select(make_view())
    assert sorted(big.sites) == ["a", "b", "c", "d"]


def test_static_k_takes_the_top_k():
    p = StaticKPolicy("static_k-k2", StaticK(name="static_k", k=[2, 3]), 2)
    assert p.select(make_view()).sites == ranked(make_view())[:2]


def test_fixed_radius_and_centralized():
    sel = FixedRadiusPolicy("fr", FixedRadius(name="fixed_radius")).select(make_view())
    assert sel.sites == ["a", "b"]  # e is within 1000 miles but has no power
    c = CentralizedPolicy("c", Centralized(name="centralized"), "agg").select(make_view())
    assert c.centralized == "agg" and c.sites == [] and c.k == 1


def test_powertrip_picks_the_k_with_the_best_gain_per_second():
    spec = PowerTrip(name="powertrip", k_init=2, window=2, h_prior=0.3)
    p = PowerTripPolicy("powertrip", spec)
    v = make_view(accuracy=0.4)
    sel = p.select(v)
    order = ranked(v)
    etas = {k: project_gain(0.4, k, 0.3) / v.round_s(order[:k]) for k in range(1, 5)}
    best = max(etas, key=etas.get)
    assert sel.k == best and sel.sites == order[:best]
    assert sel.projected_gain == pytest.approx(project_gain(0.4, best, 0.3))
    assert {c["k"] for c in sel.candidates} == {1, 2, 3, 4}


def test_powertrip_first_round_uses_k_init_and_learns_h():
    p = PowerTripPolicy("powertrip", PowerTrip(name="powertrip", k_init=3, h_prior=0.3, h_ewma=1.0))
    v = make_view(round_=1)
    sel = p.select(v)
    assert sel.k == 3 and len(sel.candidates) == 1
    p.observe(v, sel, 0.2, 0.6)
    assert p.gain.h == pytest.approx(math.log(0.8 / 0.4) / math.log(4))


def test_powertrip_with_measured_gain_only_trades_round_time():
    p = PowerTripPolicy("pt", PowerTrip(name="powertrip", k_init=3, window=2, gain="measured"))
    v = make_view(round_=1)
    p.observe(v, p.select(v), 0.2, 0.3)
    sel = p.select(make_view(round_=2))
    taus = {c["k"]: c["tau_s"] for c in sel.candidates}
    assert all(c["gain"] == pytest.approx(0.1) for c in sel.candidates)
    assert taus[sel.k] == min(taus.values())


def test_powertrip_patience_holds_k_until_accuracy_stalls():
    spec = PowerTrip(name="powertrip", k_init=1, window=3, h_prior=0.3, patience=2)
    assert PowerTrip(name="powertrip").patience == 0           # default: re-evaluate every interval
    p = PowerTripPolicy("pt", spec)
    free = PowerTripPolicy("pt", PowerTrip(name="powertrip", k_init=1, window=3, h_prior=0.3))
    accs = [0.3, 0.4, 0.5]                                     # improving: k is held at k_init
    for r, (before, after) in enumerate(zip([0.2] + accs, accs), start=1):
        v = make_view(accuracy=before, round_=r)
        sel = p.select(v)
        assert sel.k == 1 and len(sel.candidates) == 1
        p.observe(v, sel, before, after)
        fsel = free.select(v)
        free.observe(v, fsel, before, after)
    assert free.k_cur != 1                                     # without patience k moved already
    for r in (4, 5):                                           # two rounds without a new best
        v = make_view(accuracy=0.5, round_=r)
        sel = p.select(v)
        assert sel.k == 1
        p.observe(v, sel, 0.5, 0.45)
    sel = p.select(make_view(accuracy=0.45, round_=6))         # patience spent: the window search runs
    assert len(sel.candidates) > 1 and sel.k != 1


def test_powertrip_corrected_gain_uses_the_fit_and_logs_the_formula():
    p = PowerTripPolicy("pt", PowerTrip(name="powertrip", k_init=1, window=3, h_prior=0.3, gain="corrected"))
    # rounds whose measured gain does not grow with k: the fit has slope 0, so the smallest round time wins
    for r, k in enumerate((1, 3), start=1):
        p.k_cur = k
        v = make_view(accuracy=0.4, round_=r)
        sel = p.select(v)
        p.observe(v, sel, 0.4, 0.5)
    sel = p.select(make_view(accuracy=0.5, round_=3))
    assert all(c["formula_gain"] == pytest.approx(project_gain(0.5, c["k"], p.gain.h)) for c in sel.candidates)
    gains = {c["gain"] for c in sel.candidates}
    assert len(gains) == 1 and gains.pop() == pytest.approx(0.5 * (1 - 5 / 6))
    taus = {c["k"]: c["tau_s"] for c in sel.candidates}
    assert taus[sel.k] == min(taus.values())
    assert sel.formula_gain == pytest.approx(project_gain(0.5, sel.k, p.gain.h)) != sel.projected_gain
