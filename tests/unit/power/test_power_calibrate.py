"""``testbed calibrate power`` with every NVML call mocked (autospec) and training on the CPU."""

from __future__ import annotations

import time
from unittest import mock

import pytest
import yaml

pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
pytest.importorskip("torch", reason="calibration trains a real job")

from testbed.cli import main  # noqa: E402
from testbed.power.gpu.calibrate import (  # noqa: E402
    Calibration, CalibrationError, CalibrationRow, default_caps, to_profile,
)
from testbed.power.gpu.device import PowerLimits  # noqa: E402
from testbed.power.gpu.profile import load_profile  # noqa: E402

from tests.unit.power.nvml_support import NVML_FUNCS as FUNCS  # noqa: E402


class Gpu:
    """One mocked GPU (NVML units): draws min(cap, 180 W) under load, 30 W before any cap is set."""

    def __init__(self):
        self.limit_mw, self.min_mw, self.max_mw, self.default_mw = 250_000, 100_000, 300_000, 250_000
        self.sets: list[int] = []
        self.energy_mj, self.t_s = 0.0, time.monotonic()

    def power_mw(self) -> int:
        return 30_000 if not self.sets else min(self.limit_mw, 180_000)

    def energy(self) -> int:
        now = time.monotonic()
        self.energy_mj += (now - self.t_s) * self.power_mw()
        self.t_s = now
        return int(self.energy_mj)


@pytest.fixture
def gpu():
    g = Gpu()
    with mock.patch.multiple(pynvml, **{f: mock.DEFAULT for f in FUNCS}, autospec=True) as m:
        m["nvmlDeviceGetCount"].side_effect = lambda: 1
        m["nvmlDeviceGetHandleByIndex"].side_effect = lambda i: g
        m["nvmlDeviceGetPowerManagementLimitConstraints"].side_effect = lambda h: [h.min_mw, h.max_mw]
        m["nvmlDeviceGetPowerManagementDefaultLimit"].side_effect = lambda h: h.default_mw
        m["nvmlDeviceGetPowerManagementLimit"].side_effect = lambda h: h.limit_mw
        m["nvmlDeviceGetEnforcedPowerLimit"].side_effect = lambda h: h.limit_mw

        def set_limit(h, mw):
            h.energy()  # book the energy at the old power first
            h.limit_mw = mw
            h.sets.append(mw)
        m["nvmlDeviceSetPowerManagementLimit"].side_effect = set_limit
        m["nvmlDeviceGetPowerUsage"].side_effect = lambda h: h.power_mw()
        m["nvmlDeviceGetTotalEnergyConsumption"].side_effect = lambda h: h.energy()
        yield g


def test_two_caps_write_a_profile_and_restore_the_limit(gpu, tmp_path, capsys):
    out = tmp_path / "p.yaml"
    rc = main(["calibrate", "power", "--cap-w", "150", "300", "--seconds", "0.3", "--warmup-s", "0.05",
               "--idle-s", "0.1", "--family", "mlp-digits", "--device", "cpu", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert gpu.sets == [150_000, 300_000, 250_000]  # two caps, then the limit found at entry
    assert "requested_w" in text and "written:" in text
    prof = load_profile(out)
    assert (prof.min_w, prof.max_w, prof.default_w) == (150, 300, 250)
    assert prof.throughput_frac(300) == 1.0
    assert prof.draw_w(150) == pytest.approx(150, rel=0.05) and prof.draw_w(300) == pytest.approx(180, rel=0.05)
    assert prof.idle_w == pytest.approx(30, rel=0.1)
    measured = yaml.safe_load(out.read_text())["measured"]
    rows = measured["rows"]
    assert [r["requested_w"] for r in rows] == [150, 300] and [r["enforced_w"] for r in rows] == [150, 300]
    assert all(r["steps"] > 0 and r["steps_per_s"] > 0 and r["energy_j"] > 0 for r in rows)
    assert measured["torch_device"] == "cpu" and measured["device_limits_w"]["max_w"] == 300


def test_out_of_range_caps_are_refused_before_any_is_set(gpu, tmp_path, capsys):
    rc = main(["calibrate", "power", "--cap-w", "150", "400", "--device", "cpu", "--out", str(tmp_path / "p.yaml")])
    assert rc == 1 and "outside the device range" in capsys.readouterr().err
    assert gpu.sets == [] and not (tmp_path / "p.yaml").exists()


def test_no_nvml_fails_naming_why(capsys):
    with mock.patch.object(pynvml, "nvmlInit", autospec=True,
                           side_effect=pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)):
        rc = main(["calibrate", "power", "--caps", "2", "--seconds", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "needs an NVIDIA GPU through NVML" in err and "not found" in err


@pytest.mark.parametrize("argv", [["--seconds", "0"], ["--caps", "1"], ["--cap-w", "200", "200"]])
def test_bad_arguments(argv, capsys):
    assert main(["calibrate", "power", *argv]) == 2
    assert capsys.readouterr().err.startswith("error: --")


def test_default_caps_span_the_range():
    assert default_caps(PowerLimits(100.5, 300, 250), 3) == [100.5, 200.0, 300]
    with pytest.raises(CalibrationError):
        default_caps(PowerLimits(100, 300, 250), 1)


def _cal(rows) -> Calibration:
    return Calibration("gpu0", "cuda:0", "mlp-digits", PowerLimits(100, 300, 300), 20.0, 1.0,
                       tuple(CalibrationRow(c, c, p, p, 1.0, int(s), s) for c, p, s in rows))


def test_noisy_rows_become_a_valid_profile_with_notes():
    prof, notes = to_profile(_cal([(100, 95, 60), (200, 210, 90), (250, 170, 104), (300, 200, 100)]), "n")
    assert [p.throughput_frac for p in prof.points] == [0.6, 0.9, 1.0, 1.0]
    assert [p.draw_w for p in prof.points] == [95, 200, 200, 200]
    assert len(notes) == 3 and any("clipped to 1" in n for n in notes)
    with pytest.raises(CalibrationError):
        to_profile(_cal([(100, 95, 0), (300, 200, 100)]), "n")
