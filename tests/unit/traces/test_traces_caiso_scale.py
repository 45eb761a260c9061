"""A CAISO source must say what its MW series means at the site's scale (``scale_to_kw``)."""

from __future__ import annotations

import pytest

from testbed.errors import SpecError
from testbed.inputs import build_inputs
from testbed.spec.load import scenario_from_dict
from tests.conftest import ROOT, small_scenario_dict

SAMPLE = ROOT / "traces" / "samples" / "caiso-curtailments-sample.csv"


def scenario(**source):
    d = small_scenario_dict(start="2024-04-20T00:00:00-07:00", duration_h=24)
    d["traces"]["renewable"]["default"] = {"kind": "caiso", "file": str(SAMPLE), **source}
    return scenario_from_dict(d)


def test_missing_scale_is_an_error_naming_the_field():
    with pytest.raises(SpecError) as e:
        scenario()
    assert [where for where, _ in e.value.problems] == ["traces.renewable.default.scale_to_kw"]


@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive_scale_is_an_error(bad):
    with pytest.raises(SpecError, match="traces.renewable.default.scale_to_kw"):
        scenario(scale_to_kw=bad)


def test_scale_maps_the_window_peak_to_the_site_power():
    inputs = build_inputs(scenario(scale_to_kw=3.0), 1)
    tr = inputs.renewable_kw["a"]
    assert float(tr.values.max()) == pytest.approx(3.0)
    assert tr.unit == "kW"
