"""The emulated substrate split by responsibility: the base owns fabric, clock and replay; one
mover per ``emulation.nodes`` owns starting, moving, finishing and capping jobs; netns and mininet
only build their fabric. (Live behaviour: tests/integration/test_netns_substrate.py.)"""

from __future__ import annotations

import inspect

import pytest

from testbed import errors
from testbed.inputs import build_inputs
from testbed.spec import scenario_from_dict
from testbed.substrate.base import MigrationOrder
from testbed.substrate.emulated.agent_mover import AgentMover
from testbed.substrate.emulated.ballast_mover import BallastMover
from testbed.substrate.emulated.base import MOVERS, EmulatedSubstrate
from testbed.substrate.emulated.mover import order_lag, transfer_id
from testbed.substrate.netns.substrate import NetnsSubstrate
from tests.conftest import small_scenario_dict


def _inputs(nodes: str):
    d = small_scenario_dict()
    d["emulation"] = {"time_scale": 100, "byte_scale": 0.001, "nodes": nodes}
    return build_inputs(scenario_from_dict(d))


def test_one_mover_per_kind_of_node():
    assert dict(MOVERS.items()) == {"ballast": BallastMover, "agents": AgentMover}
    assert isinstance(NetnsSubstrate(_inputs("ballast"), run_id="t1").mover, BallastMover)
    assert isinstance(NetnsSubstrate(_inputs("agents"), run_id="t2").mover, AgentMover)


def test_caps_are_the_movers():
    ballast = NetnsSubstrate(_inputs("ballast"), run_id="t3")
    assert ballast.cap_target().nodes == "ballast" and ballast.cap_target().port is None
    agents = NetnsSubstrate(_inputs("agents"), run_id="t4")
    target = agents.cap_target()
    assert target.nodes == "agents" and target.port is agents.mover
    assert target.port.job_site("j1", "a") == "a"  # not moved: where the controller believes it is
    with pytest.raises(errors.TestbedError, match="no node agents run here"):
        target.port.set_throughput("j1", "a", 0.5, 200.0)  # before the agents started (or after they stopped)


def test_a_mover_that_never_started_starts_finishes_and_stops_nothing():
    for nodes in MOVERS:
        sub = NetnsSubstrate(_inputs(nodes), run_id="t5")
        sub.start_job("j1", "a", 0.0)
        sub.finish_job("j1", 10.0)
        sub.mover.stop()
        sub.mover.stop()  # idempotent


def test_fabric_substrates_only_build_their_fabric():
    from testbed.substrate.mininet.substrate import MininetSubstrate

    for cls in (NetnsSubstrate, MininetSubstrate):
        assert issubclass(cls, EmulatedSubstrate)
        own = {n for n, v in vars(cls).items() if inspect.isfunction(v)}
        assert own == {"make_fabric"}, cls


def test_transfer_ids_and_lag():
    order = MigrationOrder("job 1/x", "a", "b", 2.0, 3600.4)
    assert transfer_id(order) == "m.job_1_x.3600"
    assert order_lag(order, 3601.4) == pytest.approx(1.0) and order_lag(order, 10.0) == 0.0


def test_a_new_kind_of_nodes_is_one_file():
    import importlib

    from testbed import node_kinds
    from testbed.power.factory import backend_for
    from testbed.spec.scenario import Scenario

    with pytest.raises(errors.SpecError, match="emulation.nodes"):
        _inputs("throwaway-ballast")  # not registered yet: refused at validation, naming the field
    fixture = importlib.import_module("tests.fixtures.throwaway_mover")
    assert fixture.NAME in node_kinds.live_names()
    assert fixture.NAME in Scenario.model_json_schema()["$defs"]["Emulation"]["properties"]["nodes"]["enum"]
    sub = NetnsSubstrate(_inputs(fixture.NAME), run_id="t6")
    assert isinstance(sub.mover, fixture.ThrowawayMover) and sub.cap_target().nodes == fixture.NAME
    assert sub.mover.describe()["nodes"].startswith(fixture.NAME)
    # the profile model caps any kind of nodes; the agent throttle only agents
    assert backend_for(sub._in.scenario, fixture.NAME).name == "model"
    with pytest.raises(errors.SpecError, match="power.backend"):
        sc = sub._in.scenario.model_copy(update={"power": sub._in.scenario.power.model_copy(
            update={"backend": "emulated-throttle"})})
        backend_for(sc, fixture.NAME)


def test_a_kind_without_a_mover_is_refused_naming_the_field():
    from testbed.node_kinds import NodeKind, register_node_kind

    register_node_kind(NodeKind("throwaway-nomover", "registered, but nothing carries it"))
    with pytest.raises(errors.SpecError, match="emulation.nodes.*no mover"):
        NetnsSubstrate(_inputs("throwaway-nomover"), run_id="t7")


def test_an_outcome_never_resumes_before_the_step_it_is_reported_in():
    """Disk phases scaled back to the real size can end, in scenario time, before the emulation's
    clock (which spent time_scale x their wall time) reported them: the job resumes at the start of
    the step the controller learns of it, never in a step it has already accounted."""
    from testbed.substrate.base import MigrationOutcome
    from testbed.substrate.emulated.clock import EmulationClock

    sub = NetnsSubstrate(_inputs("ballast"), run_id="t8")
    sub.clock = EmulationClock(1e6)
    sub.clock.start(0.0)
    assert sub.poll(300.0) == []

    def outcome(t_start_s, transfer_s):
        return MigrationOutcome(order=MigrationOrder("j1", "a", "b", 1.0, t_start_s), status="completed",
                                transfer_s=transfer_s, load_s=0.0, downtime_s=0.0, goodput_gbps=1.0,
                                start_lag_s=5.0)

    sub._done.append(outcome(0.0, 95.0))  # ends at 100 s, in the step [0, 300) the controller already counted
    (late,) = sub.poll(600.0)
    assert late.resume_s == 300.0 and late.resume_floor_s == 300.0
    sub._done.append(outcome(600.0, 95.0))  # ends at 700 s, inside the step being polled: as measured
    (on_time,) = sub.poll(900.0)
    assert on_time.resume_s == 700.0 and on_time.resume_floor_s == 0.0
