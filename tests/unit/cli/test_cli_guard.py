"""The CLI never guesses and never shows a traceback for foreseeable bad input.

No abbreviated flags anywhere (``--fo`` is not ``--force``), "did you mean" for typos of commands,
choices and flags, and hostile numeric/path values refused with one line and exit 2."""

from __future__ import annotations

import argparse

import pytest

from testbed.cli import build_parser, main
from tests.conftest import ROOT

QUICK = str(ROOT / "scenarios" / "quickstart.yaml")
SWEEP = str(ROOT / "sweeps" / "example-2x2x3.yaml")


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_parser_refuses_abbreviations():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 15  # root, every command, every nested action
    assert all(p.allow_abbrev is False for p in parsers), [p.prog for p in parsers if p.allow_abbrev]


@pytest.mark.parametrize("argv,hint", [
    (["run", QUICK, "--fo"], "did you mean --force"),
    (["run", QUICK, "--substrat", "sim"], "did you mean --substrate"),
    (["run", QUICK, "--ou", "x"], "did you mean --out"),
    (["sweep", SWEEP, "--par", "2", "--dry-run"], "did you mean --parallel"),
    (["feasibility", "--checkpoint", "1", "--bandwidth-gbps", "1"], "did you mean --checkpoint-gb"),
    (["report", "x", "--titel", "t"], "did you mean --title"),
    (["rnu", QUICK], "did you mean run"),
    (["valdate", QUICK], "did you mean validate"),
    (["bench", "sym"], "did you mean sim"),
    (["sweep", SWEEP, "--substrate", "simm"], "did you mean sim"),
    (["net", "up", "x.yaml", "--impairment", "netme"], "did you mean netem"),
])
def test_typos_are_refused_with_a_suggestion(argv, hint, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: testbed") and hint in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was written


def test_exact_flags_and_equals_form_still_work(capsys):
    assert main(["feasibility", "--size-gb=40", "--bandwidth-gbps", "10"]) == 0
    assert "feasible" in capsys.readouterr().out


def test_help_and_version_return_zero(capsys):
    assert main(["--version"]) == 0
    assert main(["run", "--help"]) == 0
    assert "--force" in capsys.readouterr().out


BIG = "9" * 40
# (argv, the flag the one-line error must name)
HOSTILE = [
    *[(["feasibility", "--size-gb", "1", "--bandwidth-gbps", "1", flag, v], flag)
      for flag in ("--window-h", "--alpha", "--t-load-s", "--p-sys-kw", "--p-node-kw", "--rtt-ms",
                   "--protocol-efficiency", "--robust-degradation-pct")
      for v in ("nan", "inf", "-inf", "-1", BIG + "e400")],
    (["feasibility", "--size-gb", "1e308", "--bandwidth-gbps", "1e-308"], "--checkpoint-gb"),
    (["feasibility", "--size-gb", "1", "--bandwidth-gbps", "1e-308"], "--bandwidth-gbps"),
    (["feasibility", "--size-gb", "1e300", "--bandwidth-gbps", "1", "--p-sys-kw", "1e300"], "--p-sys-kw"),
    (["feasibility", "--size-gb", "1", "--bandwidth-gbps", "1", "--window-h", "1e308"], "--window-h"),
    (["feasibility", "--size-gb", "1e6", "--bandwidth-gbps", "1", "--p-node-kw", "1e-308"], "--p-node-kw"),
    (["feasibility", "--size-gb", "1", "--bandwidth-gbps", "1", "--alpha", "1e-308", "--epsilon", "0.1"], "--alpha"),
    (["feasibility", "--size-gb", "1", "--bandwidth-gbps", "1", "--epsilon", "1e-308"], "--epsilon"),
    (["feasibility", "--size-gb", "1", "--bandwidth-gbps", "1", "--protocol-efficiency", "1e-308"], "--checkpoint-gb"),
    (["feasibility", "--size-gb", "1", "--bandwidth-gbps", "1", "--epsilon", "0.1", "--window-noise-pct", "1",
      "--window-h", "1e300", "--window-bias-pct", "-99.99999999999999"], "--window-bias-pct"),
    (["feasibility", "--phase-diagram", "/proc/testbed-x.png"], "--phase-diagram"),
    (["feasibility", "--phase-diagram", "/dev/testbed-x.png"], "--phase-diagram"),
    (["feasibility", "--phase-diagram", "{tmp}"], "--phase-diagram"),  # a directory
    *[(["run", QUICK, "--seed", v, "--out", "{tmp}/r"], "--seed") for v in ("-1", "nan", "1e308", BIG, "0x10", "")],
    (["run", QUICK, "--substrate", "quantum", "--out", "{tmp}/r"], "--substrate"),
    (["run", "{tmp}/missing.yaml"], "missing.yaml"),
    (["run", "{tmp}"], "{tmp}"),
    *[(["sweep", SWEEP, "--parallel", v, "--dry-run"], "--parallel") for v in ("0", "-1", "nan", "inf", BIG)],
    (["report", "{tmp}/missing"], "missing"),
    (["report", "{tmp}"], "{tmp}"),
    *[(["bench", "sim", "--repeat", v, "--out", "{tmp}/b"], "--repeat") for v in ("0", "-1", BIG)],
    (["bench", "sim", "--repeat", "1", "--out", "/proc/testbed-x"], "--out"),
    (["bench", "power", "--n-caps", BIG, "--out", "{tmp}/b"], "--n-caps"),
    (["bench", "power", "--caps-w", "nan", "300", "--out", "{tmp}/b"], "--caps-w"),
    (["bench", "power", "--caps-w", "inf", "300", "--out", "{tmp}/b"], "--caps-w"),
    (["bench", "power", "--profile", "{tmp}/none.yaml", "--out", "{tmp}/b"], "--profile"),
    *[(["calibrate", "power", flag, v], flag) for flag in ("--seconds", "--warmup-s", "--idle-s")
      for v in ("nan", "inf", "-1", "1e308")],
    (["calibrate", "power", "--caps", BIG], "--caps"),
    (["calibrate", "power", "--cap-w", "nan", "200"], "--cap-w"),
    (["calibrate", "power", "--gpu", "-1"], "--gpu"),
    (["calibrate", "power", "--name", "../../etc/x"], "--name"),
    (["calibrate", "power", "--out", "/proc/testbed-x.yaml"], "--out"),
    (["calibrate", "power", "--out", "{tmp}"], "--out"),
    *[(["vm", "test", "--timeout-s", v], "--timeout-s") for v in ("nan", "inf", "-1", "0", "1e308")],
    (["vm", "test", "--junit", "/proc/testbed-x.xml"], "--junit"),
    (["vm", "test", "--json", "{tmp}"], "--json"),
    (["vm", "test", "../../../etc/passwd"], "TESTS"),
    (["clean", "--run", "../../x"], "--run"),
]


@pytest.mark.parametrize("argv,flag", HOSTILE, ids=[" ".join(a[:4]) + f" [{i}]" for i, (a, _) in enumerate(HOSTILE)])
def test_hostile_values_are_refused_without_traceback(argv, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out
    lines = err.strip().splitlines()
    assert len(lines) >= 1 and flag.replace("{tmp}", str(tmp_path)) in lines[0], err
    assert lines[0].startswith("error: "), err  # one convention: `error: ...`
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_net_up_netem_without_netem_is_a_clean_error(monkeypatch, capsys):
    from testbed.doctor import qdisc as probe
    from testbed.netem import fabric

    monkeypatch.setattr(fabric, "require_root", lambda what: None)
    monkeypatch.setattr(probe, "qdisc_available", lambda kind: False)
    made = []
    monkeypatch.setattr(fabric.Fabric, "up", lambda self: made.append(self))
    assert main(["net", "up", str(ROOT / "topologies" / "eu-5.yaml"), "--impairment", "netem"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --impairment: netem: this kernel has no netem") and "Traceback" not in err
    assert made == []


def test_os_errors_are_one_line_not_a_traceback(monkeypatch, capsys, tmp_path):
    from testbed.cli import cmd_schema

    def boom(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x"))

    monkeypatch.setattr(cmd_schema, "_schema", boom)
    assert main(["schema"]) == 1
    assert capsys.readouterr().err == f"error: {tmp_path / 'x'}: Permission denied\n"


def test_run_refuses_bad_input_before_importing_the_runner(tmp_path):
    """A bad scenario or --out is refused before numpy/pandas/matplotlib and the runner are imported."""
    import subprocess
    import sys

    code = ("import sys; from testbed.cli import main; "
            f"a = main(['run', {str(tmp_path / 'missing.yaml')!r}]); "
            f"b = main(['run', {QUICK!r}, '--out', '/']); "
            "print(a, b, sorted(m for m in ('numpy', 'pandas', 'matplotlib', 'testbed.runner') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.stdout.strip() == "2 2 []", r.stdout + r.stderr


@pytest.mark.parametrize("files", [{"trials.csv": "garbage\n"}, {"trials.csv": ""}, {"manifest.json": "{bad"}])
def test_report_of_a_damaged_directory_is_a_clean_error(files, tmp_path, capsys):
    d = tmp_path / "damaged"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    assert main(["report", str(d), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {d}: not a readable run or sweep") and "Traceback" not in err
    assert "garbage" not in err and "{bad" not in err  # never echo a file's contents
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged"]
