"""``--out`` never deletes or writes into what testbed did not create (run, report, sweep, atomic_dir)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.errors import OutDirError
from testbed.recorder import out_dir as od
from testbed.recorder import writer
from tests.unit.sweep_support import tiny_scenario, write_sweep


def leftovers(root: Path) -> list[Path]:
    """atomic_dir's working directories (``.NAME.partial-PID`` / ``.NAME.old-PID``) anywhere under root."""
    return [p for p in root.rglob(".*") if writer.PARTIAL_RE.match(p.name)]


@pytest.fixture()
def ws(tmp_path, monkeypatch):
    """A workspace: cwd = tmp_path/cwd, a fake home, a fake repository, a tiny scenario, some hostile
    targets (a fake /etc, links, a file)."""
    cwd, home, repo = tmp_path / "cwd", tmp_path / "home", tmp_path / "repo"
    for d in (cwd, home, repo):
        d.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(od, "repository_root", lambda: repo)
    scen_dir = tmp_path / "scen"
    scen_dir.mkdir()
    scenario = scen_dir / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario(), sort_keys=False))
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0\n")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "afile").write_text("keep me\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty").mkdir()
    return tmp_path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One finished run of the tiny scenario, copied into workspaces that need one."""
    d = tmp_path_factory.mktemp("tiny-run")
    (d / "tiny.yaml").write_text(yaml.safe_dump(tiny_scenario(), sort_keys=False))
    assert main(["run", str(d / "tiny.yaml"), "--out", str(d / "run"), "--no-progress"]) == 0
    return d / "run"


def _refused(capsys, argv: list[str], why: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out ") and why in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# (--out as given, relative to the workspace; a piece of the one-line reason)
REFUSED = [
    (".", "current or a parent directory"),
    ("..", "current or a parent directory"),
    ("/", "root directory"),
    ("cwd/..", "current or a parent directory"),
    ("{cwd}", "is the current directory"),
    ("{ws}", "contains"),                        # holds the current directory and the scenario
    ("{home}", "is the home directory"),
    ("{repo}", "is the testbed repository"),
    ("{scen}", "contains the input"),            # the folder holding the scenario file
    ("{scen}/tiny.yaml", "is the input"),        # the scenario file itself
    ("{ws}/link", "symbolic link"),
    ("{ws}/dangling", "symbolic link"),
    ("{ws}/afile", "not a directory"),
    ("{ws}/fifo", "not a directory"),
    ("{ws}/etc", "not written by testbed"),      # a fake /etc: not empty, no marker
    ("/proc/testbed-out-test", "special filesystem"),
    ("/sys/testbed-out-test", "special filesystem"),
    ("/dev/shm/testbed-out-test", "special filesystem"),
    ("{ws}/afile/sub", "not a directory"),
]


def _expand(text: str, ws: Path) -> str:
    return text.format(ws=ws, cwd=ws / "cwd", home=ws / "home", repo=ws / "repo", scen=ws / "scen")


def _snapshot(ws: Path) -> dict[str, bytes | None]:
    out = {}
    for p in sorted(ws.rglob("*")):
        if ".cache" in p.relative_to(ws).parts:  # matplotlib's font cache under the fake home
            continue
        if p.is_symlink():
            out[str(p)] = os.readlink(p).encode()
        elif p.is_file():
            out[str(p)] = p.read_bytes()
        else:
            out[str(p)] = None
    return out


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("out,why", REFUSED)
def test_run_refuses(ws, capsys, out, why, force):
    before = _snapshot(ws)
    argv = ["run", str(ws / "scen" / "tiny.yaml"), "--out", _expand(out, ws), "--no-progress"]
    _refused(capsys, argv + (["--force"] if force else []), why)
    assert _snapshot(ws) == before and not leftovers(ws)
    assert not Path("/proc/testbed-out-test").exists() and not Path("/dev/shm/testbed-out-test").exists()


@pytest.mark.parametrize("out,why", [o for o in REFUSED if "input" not in o[1]])
def test_report_refuses(ws, capsys, out, why, tiny_run):
    run = ws / "r1"
    shutil.copytree(tiny_run, run)
    before = _snapshot(ws)
    _refused(capsys, ["report", str(run), "--out", _expand(out, ws)], why)
    assert _snapshot(ws) == before and not leftovers(ws)


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("out,why", [o for o in REFUSED if "input" not in o[1]])
def test_sweep_refuses(ws, capsys, out, why, force):
    sweep = write_sweep(ws / "sw", {"seeds": 1, "grid": {}}, tiny_scenario())
    before = _snapshot(ws)
    _refused(capsys, ["sweep", str(sweep), "--out", _expand(out, ws), "--parallel", "1"]
             + (["--force"] if force else []), why)
    _refused(capsys, ["sweep", str(sweep), "--out", _expand(out, ws), "--dry-run"], why)
    assert _snapshot(ws) == before and not leftovers(ws)


def test_sweep_refuses_its_own_folder(ws, capsys):
    sweep = write_sweep(ws / "sw", {"seeds": 1, "grid": {}}, tiny_scenario())
    _refused(capsys, ["sweep", str(sweep), "--out", str(ws / "sw"), "--force"], "contains the input")
    _refused(capsys, ["sweep", str(sweep), "--out", str(ws / "sw" / "scenario.yaml")], "is the input")


def test_report_refuses_its_input(ws, capsys, tiny_run):
    run = ws / "r1"
    shutil.copytree(tiny_run, run)
    _refused(capsys, ["report", str(run), "--out", str(run)], "is the input")
    _refused(capsys, ["report", str(run), "--out", str(ws)], "contains")
    assert (run / "manifest.json").is_file()


def test_non_writable_parent_refused(ws, capsys, monkeypatch):
    (ws / "ro").mkdir()
    real_access = os.access
    monkeypatch.setattr(od.os, "access", lambda p, mode: False if Path(p) == ws / "ro" else real_access(p, mode))
    _refused(capsys, ["run", str(ws / "scen" / "tiny.yaml"), "--out", str(ws / "ro" / "new" / "out")], "not writable")


def test_special_filesystem_by_mount_type(ws, capsys, monkeypatch):
    monkeypatch.setattr(od, "_mount_fstype", lambda p: "cgroup2")
    _refused(capsys, ["run", str(ws / "scen" / "tiny.yaml"), "--out", str(ws / "x")], "special filesystem (cgroup2)")


@pytest.mark.filterwarnings("ignore:No artists with labels")  # a report over runs without migrations
def test_run_uses_empty_dir_and_force_replaces_only_results(ws, capsys):
    scen = str(ws / "scen" / "tiny.yaml")
    out = ws / "empty"
    assert main(["run", scen, "--out", str(out), "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "testbed-results/1"
    capsys.readouterr()
    _refused(capsys, ["run", scen, "--out", str(out), "--no-progress"], "use --force")
    (out / "stale-marker").write_text("from the first run\n")
    assert main(["run", scen, "--out", str(out), "--no-progress", "--force"]) == 0
    assert (out / "manifest.json").is_file() and not (out / "stale-marker").exists()
    assert not leftovers(ws)
    # a run directory is not a sweep, a report is not a run
    sweep = write_sweep(ws / "sw", {"seeds": 1, "grid": {}}, tiny_scenario())
    capsys.readouterr()
    _refused(capsys, ["sweep", str(sweep), "--out", str(out), "--force"], "another kind (testbed-results/1)")
    assert main(["report", str(out), "--out", str(ws / "rep")]) == 0
    capsys.readouterr()
    _refused(capsys, ["run", scen, "--out", str(ws / "rep"), "--force"], "another kind (testbed-report/1)")


@pytest.mark.filterwarnings("ignore:No artists with labels")
def test_report_regenerates_its_own_report(ws, capsys, tiny_run):
    run = ws / "r1"
    shutil.copytree(tiny_run, run)
    assert main(["report", str(run)]) == 0  # default: DIR/report
    marker = json.loads((run / "report" / "report.json").read_text())
    assert marker["format"] == "testbed-report/1"
    (run / "report" / "stale").write_text("x")
    assert main(["report", str(run)]) == 0
    assert (run / "report" / "report.md").is_file() and not (run / "report" / "stale").exists()
    assert not leftovers(ws)


def test_sweep_resumes_only_its_own_directory(ws, capsys):
    sweep = write_sweep(ws / "sw", {"seeds": 1, "grid": {}}, tiny_scenario())
    out = ws / "empty"
    assert main(["sweep", str(sweep), "--out", str(out), "--parallel", "1"]) == 0
    assert json.loads((out / "sweep.json").read_text())["format"].startswith("testbed-sweep/")
    assert main(["sweep", str(sweep), "--out", str(out), "--parallel", "1"]) == 0  # resumed: all reused
    assert "1 reused" in capsys.readouterr().out
    (out / "trials" / "mine.txt").write_text("x")
    assert main(["sweep", str(sweep), "--out", str(out), "--parallel", "1", "--force"]) == 0
    assert not (out / "trials" / "mine.txt").exists() and "0 reused" in capsys.readouterr().out
    assert not leftovers(ws)


# ----------------------------------------------------------------------------- atomic_dir


def test_atomic_dir_failure_and_interrupt_leave_nothing(tmp_path):
    out = tmp_path / "a" / "b" / "out"
    for exc in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with writer.atomic_dir(out, False) as tmp:
                assert writer.PARTIAL_RE.match(tmp.name) and tmp.name == f".out.partial-{os.getpid()}"
                (tmp / "f").write_text("half")
                raise exc
        assert not out.exists() and not (tmp_path / "a").exists()  # the parents it made are gone too
        assert not leftovers(tmp_path)


def test_atomic_dir_replaces_marked_dir_and_defers_sigint_during_swap(tmp_path, monkeypatch, sigint_raises):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"format": "testbed-results/1"}))
    (out / "old-file").write_text("old")
    real_rename = Path.rename
    sent = []

    def rename(self, target):  # a Ctrl-C in the middle of the swap: held back until it is complete
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        with writer.atomic_dir(out, True) as tmp:
            (tmp / "manifest.json").write_text(json.dumps({"format": "testbed-results/1"}))
            (tmp / "new-file").write_text("new")
    assert sent and (out / "new-file").read_text() == "new" and not (out / "old-file").exists()
    assert not leftovers(tmp_path)


def test_atomic_dir_rechecks_before_the_swap(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(OutDirError):
        with writer.atomic_dir(out, True) as tmp:
            (tmp / "x").write_text("x")
            out.mkdir()
            (out / "theirs").write_text("not ours")  # appeared meanwhile, without a marker
    assert (out / "theirs").read_text() == "not ours" and not leftovers(tmp_path)


def test_leftover_names_are_recognisable(tmp_path):
    assert writer.leftover_of(tmp_path / f".run-1.partial-{os.getpid()}") == ("run-1", os.getpid())
    assert writer.leftover_of(tmp_path / ".run-1.old-42") == ("run-1", 42)
    assert writer.leftover_of(tmp_path / "run-1") is None
    assert writer.partial_dir(tmp_path / "x", 7) == tmp_path / ".x.partial-7"


def test_sweep_reruns_a_trial_whose_record_is_damaged(ws, capsys):
    sweep = write_sweep(ws / "sw", {"seeds": 1, "grid": {}}, tiny_scenario())
    out = ws / "empty"
    assert main(["sweep", str(sweep), "--out", str(out), "--parallel", "1"]) == 0
    (record,) = out.glob("trials/*/seed-*/trial.json")
    record.write_text("[1, 2]")
    capsys.readouterr()
    assert main(["sweep", str(sweep), "--out", str(out), "--parallel", "1"]) == 0
    assert "0 reused, 1 run" in capsys.readouterr().out
    assert json.loads(record.read_text())["status"] == "completed" and not leftovers(ws)


def test_federated_run_uses_the_same_rule(ws):
    from testbed.runner import run_scenario as run_federated
    from testbed.spec.load import LoadedScenario
    from tests.unit.federated_support import tiny_scenario as fl_tiny

    scen = ws / "scen" / "fl.yaml"
    scen.write_text("name: fl-tiny\n")
    loaded = LoadedScenario(scenario=fl_tiny(), path=scen, text="name: fl-tiny\n", sha256="0" * 64,
                            topology_path=None)
    before = _snapshot(ws)
    for out, why in ((ws / "etc", "not written by testbed"), (ws / "link", "symbolic link"),
                     (ws / "scen", "contains the input"), (Path("."), "current or a parent")):
        with pytest.raises(OutDirError, match=why):
            run_federated(loaded, out_dir=out, substrate="sim", seed=None, progress=False, force=True, argv=[])
    assert _snapshot(ws) == before and not leftovers(ws)


@pytest.mark.parametrize("out,why", [("a" * 300, "longer than 255"), ("x/" + "a" * 300 + "/y", "longer than 255"),
                                     ("a" * 240, "last name is longer"), ("d/" * 3000, "longer than 4095")])
def test_too_long_names_are_refused_and_nothing_is_made(ws, capsys, out, why):
    _refused(capsys, ["run", str(ws / "scen" / "tiny.yaml"), "--out", out, "--no-progress"], why)
    assert list(Path.cwd().iterdir()) == []


def test_parents_made_before_a_failure_are_removed(tmp_path, monkeypatch):
    real_mkdir = Path.mkdir

    def mkdir(self, *a, **k):
        if self.name == "b":
            raise OSError(28, "No space left on device", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    with pytest.raises(OSError):
        with writer.atomic_dir(tmp_path / "a" / "b" / "c" / "out", False):
            pass
    assert list(tmp_path.iterdir()) == []
