"""Scenario specification: pydantic models, validated at load time (layer 1: imports nothing live)."""

from testbed.spec.load import LoadedScenario, load_scenario, scenario_from_dict
from testbed.spec.scenario import Scenario

__all__ = ["LoadedScenario", "Scenario", "load_scenario", "scenario_from_dict"]
