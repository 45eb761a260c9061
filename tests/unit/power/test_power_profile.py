"""Power/performance profiles, the node power model and trace-to-cap budgets."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.errors import SpecError
from testbed.power.budget import plan_site
from testbed.power.node_model import NodePower
from testbed.power.gpu.profile import (
    PowerProfile, ProfileError, ProfilePoint, builtin_profiles, load_profile, save_profile,
)
from testbed.spec import scenario_from_dict
from testbed.spec.topology import BUILTIN_NODE_TYPES, NodeType
from tests.conftest import small_scenario_dict


def test_every_shipped_profile_loads_and_says_where_it_comes_from():
    names = builtin_profiles()
    assert {"rtx4090", "a100-sxm4", "jetson-thor", "h200-sxm"} <= set(names)
    for n in names:
        p = load_profile(n)
        assert p.source and len(p.points) >= 2
        assert p.throughput_frac(p.max_w) == 1.0
        assert p.throughput_frac(p.min_w) < 1.0


def test_builtin_node_types_use_shipped_profiles_that_fit_their_power():
    for name, nt in BUILTIN_NODE_TYPES.items():
        node = NodePower.of(nt, name)
        assert nt.power_profile in builtin_profiles()
        assert node.host_kw >= 0
        assert node.active_kw(node.max_cap_w) == pytest.approx(nt.p_active_kw)
        assert node.speed(node.max_cap_w) == pytest.approx(nt.speed)


def test_interpolation_and_clamping():
    p = load_profile("rtx4090")
    assert p.throughput_frac(275) == pytest.approx((0.76 + 0.88) / 2)
    assert p.throughput_frac(10) == p.throughput_frac(p.min_w)
    assert p.throughput_frac(10_000) == 1.0
    assert p.draw_w(p.max_w) == p.max_draw_w == 410


@given(st.floats(0, 1000))
def test_cap_for_draw_is_the_inverse_of_draw(budget_w):
    p = load_profile("a100-sxm4")
    cap = p.cap_for_draw_w(budget_w)
    assert p.min_w <= cap <= p.max_w
    if p.min_draw_w <= budget_w <= p.max_draw_w:
        assert p.draw_w(cap) == pytest.approx(budget_w, abs=1e-6)
    elif budget_w > p.max_draw_w:
        assert cap == p.max_w
    else:
        assert cap == p.min_w


@given(st.floats(0.0, 2.0))
def test_node_cap_for_budget_never_exceeds_budget_within_range(budget_kw):
    node = NodePower.of(BUILTIN_NODE_TYPES["rtx4090-minipc"])
    cap = node.cap_for_budget_kw(budget_kw)
    if node.min_cap_w <= cap <= node.max_cap_w and cap < node.max_cap_w:
        assert node.active_kw(cap) <= budget_kw + 1e-9
    assert cap >= 0


@pytest.mark.parametrize("bad, field", [
    ({"points": [[150, 0.5, 150]]}, "at least two"),
    ({"points": [[150, 0.5, 150], [100, 1.0, 400]]}, "strictly increasing"),
    ({"points": [[150, 0.5, 150], [450, 0.9, 400]]}, "must be 1.0"),
    ({"points": [[150, 0.9, 150], [300, 0.5, 280], [450, 1.0, 400]]}, "must not fall"),
    ({"points": [[150, 0.5, 200], [450, 1.0, 400]]}, "draw_w <= cap_w"),
    ({"min_w": 500}, "min_w <= default_w"),
    ({"points": [[200, 0.5, 200], [450, 1.0, 400]]}, "span"),
    ({"points": "x"}, "each point"),
])
def test_malformed_profile_names_the_problem(tmp_path, bad, field):
    d = {"name": "t", "min_w": 150, "max_w": 450, "idle_w": 20,
         "points": [[150, 0.5, 150], [450, 1.0, 400]], **bad}
    import yaml

    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(ProfileError, match=field):
        load_profile(f)


def test_profile_file_errors(tmp_path):
    with pytest.raises(ProfileError, match="unknown power profile 'nope'"):
        load_profile("nope")
    with pytest.raises(ProfileError, match="not found"):
        load_profile(tmp_path / "missing.yaml")
    (tmp_path / "x.yaml").write_text("name: [")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_profile(tmp_path / "x.yaml")
    (tmp_path / "y.yaml").write_text("name: t\nmin_w: 1\n")
    with pytest.raises(ProfileError, match="missing field 'max_w'"):
        load_profile(tmp_path / "y.yaml")


def test_save_and_load_round_trip(tmp_path):
    p = load_profile("h200-sxm")
    save_profile(p, tmp_path / "h.yaml", measured={"rows": [1, 2]})
    q = load_profile(tmp_path / "h.yaml")
    assert q.to_dict() == p.to_dict()


def test_linear_profile_is_proportional():
    p = PowerProfile.linear("l", 600)
    assert p.throughput_frac(300) == pytest.approx(0.5, abs=1e-6)
    assert p.points[-1] == ProfilePoint(600, 1.0, 600)


def test_scenario_power_profile_errors_name_the_field(tmp_path):
    d = small_scenario_dict()
    d["node_types"] = {"x": {"p_active_kw": 0.75, "p_idle_kw": 0.1, "power_profile": "nope"}}
    d["sites"][0]["node_type"] = "x"
    with pytest.raises(SpecError, match=r"node_types.x.power_profile: unknown power profile 'nope'"):
        scenario_from_dict(d)
    d["node_types"]["x"] = {"p_active_kw": 0.3, "p_idle_kw": 0.1, "power_profile": "a100-sxm4"}
    with pytest.raises(SpecError, match=r"node_types.x.power_profile: .*more than the node's p_active_kw"):
        scenario_from_dict(d)
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nmin_w: 100\nmax_w: 300\nidle_w: 10\npoints: [[100, 0.4, 100], [300, 1.0, 280]]\n")
    d["node_types"]["x"] = {"p_active_kw": 0.5, "p_idle_kw": 0.1, "power_profile": "mine.yaml"}
    sc = scenario_from_dict(d, base_dir=tmp_path)
    assert sc.node_types["x"].power_profile == str((tmp_path / "mine.yaml").resolve())
    node = NodePower.of(sc.node_types["x"])
    assert node.host_kw == pytest.approx(0.22)


def test_plan_site_feeds_transfers_and_idle_first_then_shares_evenly():
    node = NodePower.of(NodeType(p_active_kw=0.75, p_idle_kw=0.08, power_profile="rtx4090"))
    unlimited = plan_site("a", node, renewable_kw=0.0, grid_topup_kw=None, n_running=3, n_idle=1, n_transfer_ends=1,
                          p_sys_kw=1.8)
    assert unlimited.cap_w == node.max_cap_w and math.isinf(unlimited.node_budget_kw)
    plan = plan_site("a", node, renewable_kw=0.8, grid_topup_kw=1.5, n_running=2, n_idle=1, n_transfer_ends=1,
                     p_sys_kw=1.8)
    assert plan.fixed_kw == pytest.approx(0.08 + 0.9)
    assert plan.node_budget_kw == pytest.approx((2.3 - 0.98) / 2)
    assert node.active_kw(plan.cap_w) == pytest.approx(plan.node_budget_kw)
    starved = plan_site("a", node, renewable_kw=0.0, grid_topup_kw=0.1, n_running=1, n_idle=0, n_transfer_ends=0,
                        p_sys_kw=1.8)
    assert starved.cap_requested_w == 0.0 and starved.cap_w == node.min_cap_w


def test_profile_files_are_read_by_the_hardened_loader(tmp_path):
    """A profile file gets the scenario's YAML rules: duplicate keys and alias bombs are refused by
    line, and the error never quotes the file."""
    (tmp_path / "dup.yaml").write_text("name: secret-name-1\nname: secret-name-2\n")
    with pytest.raises(ProfileError, match=r"dup.yaml:2: duplicate key") as e:
        load_profile(tmp_path / "dup.yaml")
    assert "secret-name" not in str(e.value)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi"))
    (tmp_path / "bomb.yaml").write_text(bomb)
    with pytest.raises(ProfileError, match="alias"):
        load_profile(tmp_path / "bomb.yaml")
