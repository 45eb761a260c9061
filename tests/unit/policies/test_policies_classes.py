"""feasibility_classes: the paper's fixed transfer-time classes (A < 60 s, B < 300 s, C beyond)
as the time rule in place of Eq. 1, beside feasibility_aware on the same cluster state."""

from __future__ import annotations

import pytest

from testbed.controller.policy_api import ClusterView
from testbed.policies import make_policy
from tests.unit.policies.policy_support import policy_setup

# a: no renewable power (its job runs on grid); b: 3 kW for ``window_h``, nothing after
POLICIES = ["feasibility_aware", "feasibility_classes",
            {"name": "feasibility_classes", "class_b": "always", "label": "classes-always"}]


def _verdicts(checkpoint_gb: float, window_h: float) -> dict[str, tuple[bool, bool, int]]:
    """Per policy: (time rule, Eq. 2, moves made) for the one job at a and the one candidate b."""
    sc, inputs, cluster = policy_setup({"a": [(0, 0.0)], "b": [(0, 3.0), (window_h, 0.0)]}, jobs={"a": 1},
                                       checkpoint_gb=checkpoint_gb, policies=POLICIES)
    out = {}
    for spec in sc.policies:
        policy = make_policy(spec, sc)
        view = ClusterView(0.0, cluster, inputs)
        (cand,) = policy._candidates(view, view.running_jobs("a")[0], "a")
        moves, _ = policy.decide(ClusterView(0.0, cluster, inputs))
        out[spec.label or spec.name] = (cand.eq1_ok, cand.eq2_ok, len(moves))
    return out


def test_class_c_is_never_moved_even_when_eq1_allows_it():
    # 400 GB at 10 Gbit/s: 320 s (paper class C); Eq. 1: 330.7 s < 0.1 x 3 h = 1080 s
    v = _verdicts(400.0, 3.0)
    assert v["feasibility_aware"] == (True, True, 1)
    assert v["feasibility_classes"] == (False, True, 0)
    assert v["classes-always"] == (False, True, 0)


def test_class_a_is_always_moved_even_when_eq1_forbids_it():
    # 40 GB at 10 Gbit/s: 32 s (class A); Eq. 1: 42.7 s >= 0.1 x 5 min = 30 s
    v = _verdicts(40.0, 5 / 60)
    assert v["feasibility_aware"] == (False, True, 0)
    assert v["feasibility_classes"] == (True, True, 1)


@pytest.mark.parametrize("window_h, eq1", [(3.0, True), (10 / 60, False)])
def test_class_b_follows_eq1_or_the_cut_offs_alone(window_h, eq1):
    # 120 GB at 10 Gbit/s: 96 s (class B); Eq. 1: 106.7 s against 1080 s (3 h) or 60 s (10 min)
    v = _verdicts(120.0, window_h)
    assert v["feasibility_aware"][0] is eq1
    assert v["feasibility_classes"][0] is eq1
    assert v["classes-always"] == (True, True, 1)
