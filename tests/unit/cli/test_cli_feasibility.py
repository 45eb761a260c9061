"""``testbed feasibility`` through ``testbed.cli.main``: output, JSON, and one-line errors with exit 2."""

from __future__ import annotations

import json

import pytest

import testbed.cli
from testbed.feasibility import TCP_EFFICIENCY_MTU1500


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run ``testbed.cli.main`` with only this sub-command registered (the others are tested elsewhere);
    return (exit code, stdout, stderr)."""
    monkeypatch.setattr(testbed.cli, "_COMMANDS", ("feasibility",))

    def run(*argv: str) -> tuple[int, str, str]:
        code = testbed.cli.main(["feasibility", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _lines(stdout: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in stdout.splitlines())


def test_human_output_for_the_seed_example(cli):
    code, out, err = cli("--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--window-h", "2.5")
    assert code == 0 and err == ""
    values = _lines(out)
    assert float(values["transfer_s"]) == 32
    assert float(values["load_s"]) == 10.3
    assert float(values["downtime_s"]) == 0.4
    assert float(values["total_s"]) == pytest.approx(42.7)
    assert float(values["budget_s"]) == 900
    assert values["feasible"] == "true"
    assert values["class"] == "A"
    assert values["paper_class"] == "A"
    assert float(values["e_cost_kwh"]) == pytest.approx(0.016)
    assert float(values["breakeven_min"]) == pytest.approx(1.28)
    assert values["corrections"] == "none"
    assert "epsilon" not in values
    # Aligned: every value starts in the same column.
    assert len({len(line) - len(line.split(None, 1)[1]) for line in out.splitlines()}) == 1


def test_json_output(cli):
    code, out, _ = cli("--checkpoint-gb", "100", "--bandwidth-gbps", "1", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["transfer_s"] == 800
    assert d["budget_s"] == pytest.approx(900)  # --window-h defaults to the paper's 2.5 h
    assert d["feasible"] is True
    assert d["class"] == "B" and d["paper_class"] == "C"
    assert d["corrections"] == []


def test_json_and_human_forms_have_the_same_keys(cli):
    argv = ("--checkpoint-gb", "280", "--bandwidth-gbps", "10", "--epsilon", "0.1", "--window-noise-pct", "30")
    _, human, _ = cli(*argv)
    _, js, _ = cli(*argv, "--json")
    assert list(_lines(human)) == list(json.loads(js))


def test_risk_budget(cli):
    _, out, _ = cli("--checkpoint-gb", "100", "--bandwidth-gbps", "1", "--epsilon", "0.1", "--window-noise-pct", "30", "--json")
    d = json.loads(out)
    assert d["epsilon"] == 0.1
    assert d["risk_window_s"] < 9000
    assert d["feasible"] is False  # 810.7 s fits 900 s, not the 10%-risk window's budget
    assert d["p_window_ok"] < 0.9


def test_epsilon_without_noise_is_deterministic(cli):
    _, plain, _ = cli("--checkpoint-gb", "100", "--bandwidth-gbps", "1", "--json")
    _, risky, _ = cli("--checkpoint-gb", "100", "--bandwidth-gbps", "1", "--epsilon", "0.05", "--json")
    assert json.loads(risky)["budget_s"] == json.loads(plain)["budget_s"]
    assert json.loads(risky)["feasible"] == json.loads(plain)["feasible"]


def test_corrections(cli):
    _, out, _ = cli("--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--tcp-efficiency", "--rtt-ms", "50", "--json")
    d = json.loads(out)
    assert d["corrections"] == ["protocol_efficiency", "slow_start"]
    assert d["transfer_s"] > 32 / TCP_EFFICIENCY_MTU1500
    _, out, _ = cli("--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--protocol-efficiency", "0.5", "--json")
    assert json.loads(out)["transfer_s"] == pytest.approx(64)


def test_parameters_are_passed_through(cli):
    _, out, _ = cli("--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--window-h", "1", "--alpha", "0.2",
                    "--t-load-s", "5", "--t-downtime-s", "1", "--p-sys-kw", "3.6", "--p-node-kw", "1.5", "--json")
    d = json.loads(out)
    assert d["budget_s"] == pytest.approx(720)
    assert d["total_s"] == pytest.approx(38)
    assert d["e_cost_kwh"] == pytest.approx(0.032)
    assert d["breakeven_min"] == pytest.approx(1.28)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--checkpoint-gb", "0", "--bandwidth-gbps", "10"], "--checkpoint-gb"),
        (["--checkpoint-gb", "-5", "--bandwidth-gbps", "10"], "--checkpoint-gb"),
        (["--checkpoint-gb", "abc", "--bandwidth-gbps", "10"], "--checkpoint-gb"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "0"], "--bandwidth-gbps"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "nan"], "--bandwidth-gbps"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "inf"], "--bandwidth-gbps"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--window-h", "0"], "--window-h"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--alpha", "0"], "--alpha"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--alpha", "1.5"], "--alpha"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--t-load-s", "-1"], "--t-load-s"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--p-sys-kw", "0"], "--p-sys-kw"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--p-node-kw", "-2"], "--p-node-kw"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--epsilon", "0"], "--epsilon"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--epsilon", "0.7"], "--epsilon"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--epsilon", "0.1", "--window-noise-pct", "-1"],
         "--window-noise-pct"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--window-noise-pct", "10"], "--window-noise-pct"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--epsilon", "0.1", "--window-bias-pct", "-100"],
         "--window-bias-pct"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--protocol-efficiency", "1.2"], "--protocol-efficiency"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--protocol-efficiency", "0.9", "--tcp-efficiency"],
         "--tcp-efficiency"),
        (["--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--rtt-ms", "-3"], "--rtt-ms"),
        (["--bandwidth-gbps", "10"], "--checkpoint-gb"),
        (["--checkpoint-gb", "40", "--phase-diagram", "x.png"], "--bandwidth-gbps"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(cli, argv, flag):
    code, out, err = cli(*argv)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"error: {flag}: ")
    assert "Traceback" not in err


def test_missing_size_and_bandwidth(cli):
    code, out, err = cli()
    assert code == 2 and out == ""
    assert [line.split(": ")[1] for line in err.splitlines()] == ["--checkpoint-gb", "--bandwidth-gbps"]
    assert all(line.startswith("error: ") for line in err.splitlines())
    assert "required" in err


def test_phase_diagram_alone(cli, tmp_path):
    path = tmp_path / "phase.png"
    code, out, err = cli("--phase-diagram", str(path), "--window-h", "2.5", "--alpha", "0.1")
    assert code == 0 and err == ""
    assert path.stat().st_size > 20_000
    assert _lines(out) == {"phase_diagram": str(path)}


def test_phase_diagram_with_assessment(cli, tmp_path):
    path = tmp_path / "phase.png"
    code, out, _ = cli("--checkpoint-gb", "40", "--bandwidth-gbps", "10", "--phase-diagram", str(path), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["phase_diagram"] == str(path) and d["transfer_s"] == 32
    assert path.exists()


@pytest.mark.parametrize("name", ["missing-dir/phase.png", "phase.jpgx"])
def test_phase_diagram_bad_path(cli, tmp_path, name):
    code, out, err = cli("--phase-diagram", str(tmp_path / name))
    assert code == 2 and out == ""
    assert err.startswith("error: --phase-diagram: ") and len(err.splitlines()) == 1
