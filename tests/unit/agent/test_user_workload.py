"""Your own workload: a user's program under the agent contract (TESTBED_* variables, SIGTERM =
checkpoint and exit, progress lines). Agents run here in-process (no namespaces); the checkpoint
is carried to a second agent as the transfer service would leave it (checkpoint + ballast), and the
resumed run ends in the same state digest as an uninterrupted one."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml

from testbed.agent.agent import Agent
from testbed.agent.protocol import RequestRefused, _validate
from testbed.cli import main
from testbed.spec import load_scenario, scenario_from_dict
from tests.conftest import ROOT, small_scenario_dict

EXAMPLE = ROOT / "examples" / "workloads"


def _call(agent: Agent, cmd: str, **args):
    name, parsed = _validate({"cmd": cmd, "args": args})
    return agent.handlers()[name](parsed)


def _wait(agent: Agent, jid: str, pred, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = _call(agent, "status", job_id=jid)
        assert st["error"] is None, st
        if pred(st):
            return st
        time.sleep(0.05)
    raise AssertionError(f"{jid}: not there after {timeout_s} s: {st}")


def _agents(tmp_path, *names):
    out = []
    for n in names:
        a = Agent(n, tmp_path / n, "t" * 32)
        out.append(a)
    return out


def _program(**kw) -> dict:
    return {"command": ["{python}", "train_loop.py"], "cwd": str(EXAMPLE), **kw}


@pytest.fixture
def agents(tmp_path):
    made = _agents(tmp_path, "a", "b", "c")
    yield made
    for a in made:
        a.shutdown()


def _final_digest(agent: Agent, jid: str) -> str:
    st = _wait(agent, jid, lambda s: s["done"])
    assert st["digest"], st
    return st["digest"]


def test_user_program_migrates_and_resumes_exactly(agents):
    pytest.importorskip("torch")
    a, b, c = agents
    steps, pace = 120, 40.0
    # uninterrupted, at c
    _call(c, "start_job", job_id="ref", family="my-mlp", seed=5, steps_per_s=1000, max_steps=steps, program=_program())
    # migrated: a trains, checkpoints on SIGTERM, its file (+ ballast) lands at b, b resumes
    _call(a, "start_job", job_id="j1", family="my-mlp", seed=5, steps_per_s=pace, max_steps=steps, program=_program())
    _wait(a, "j1", lambda s: s["steps"] >= 10)
    ck = _call(a, "checkpoint_and_pause", job_id="j1")
    assert 10 <= ck["step"] < steps and ck["size_bytes"] > 0 and ck["t_save_s"] > 0
    data = Path(ck["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == ck["sha256"]
    assert _call(a, "status", job_id="j1")["paused"] is True
    (b.incoming / "j1-m1").write_bytes(data + b"\0" * 100_000)  # as send_checkpoint leaves it: ballast behind
    loaded = _call(b, "load_and_resume", job_id="j1", transfer_id="j1-m1", sha256=ck["sha256"],
                   checkpoint_bytes=ck["size_bytes"], steps_per_s=1000, max_steps=steps, program=_program(), seed=5)
    assert loaded["step"] == ck["step"] and loaded["bytes_read"] == ck["size_bytes"] + 100_000 and loaded["t_deserialize_s"] > 0
    assert not (b.incoming / "j1-m1").exists()
    _call(a, "free", job_id="j1")
    moved = _final_digest(b, "j1")
    assert moved == _final_digest(c, "ref")
    assert len(_call(b, "losses", job_id="j1")["losses"]) == steps - ck["step"]


CALLABLE = '''
import json, time

def train(ctx):
    step, total = 0, 0
    if ctx.resume_from is not None:
        step, total = json.loads(ctx.resume_from.read_text())
    ctx.report(step)
    while not ctx.stop_requested and (ctx.max_steps is None or step < ctx.max_steps):
        step += 1
        total = (total * 31 + step + ctx.seed) % 1000003
        ctx.report(step, loss=1.0 / step)
        time.sleep(0.01)
    if ctx.stop_requested:
        ctx.write_checkpoint(json.dumps([step, total]).encode())
    else:
        ctx.report(step, digest=str(total))
'''


def test_callable_program_and_resume_at_the_source(agents, tmp_path):
    a, b, c = agents
    (tmp_path / "userfn.py").write_text(CALLABLE)
    prog = {"callable": "userfn:train", "cwd": str(tmp_path)}
    _call(c, "start_job", job_id="ref", family="f", seed=9, max_steps=300, program=prog)
    _call(a, "start_job", job_id="j", family="f", seed=9, max_steps=300, program=prog)
    _wait(a, "j", lambda s: s["steps"] >= 20)
    ck = _call(a, "checkpoint_and_pause", job_id="j")
    # the migration failed after the checkpoint: the source resumes from it
    st = _call(a, "resume", job_id="j")
    assert st["paused"] is False and st["steps"] >= ck["step"]
    assert _final_digest(a, "j") == _final_digest(c, "ref")


BROKEN = '''
import os, signal, sys, time, json
def bye(*_):
    sys.exit(int(os.environ.get("RC", "0")))
signal.signal(signal.SIGTERM, bye)
with open(os.environ["TESTBED_PROGRESS_PATH"], "a") as f:
    f.write(json.dumps({"step": 0}) + "\\n")
while True:
    time.sleep(0.05)
'''


@pytest.mark.parametrize("rc, expected", [("0", "no checkpoint at $TESTBED_CKPT_PATH after SIGTERM"),
                                          ("3", "the program exited with 3 on SIGTERM")])
def test_a_program_that_breaks_the_contract_is_refused_clearly(agents, tmp_path, rc, expected):
    a = agents[0]
    (tmp_path / "broken.py").write_text(BROKEN)
    prog = {"command": [sys.executable, "broken.py"], "cwd": str(tmp_path), "env": {"RC": rc}}
    _call(a, "start_job", job_id="x", family="f", seed=1, program=prog)
    with pytest.raises(RequestRefused, match=expected.replace("$", r"\$")):
        _call(a, "checkpoint_and_pause", job_id="x")


def test_a_program_that_never_reports_fails_to_start(agents, tmp_path):
    a = agents[0]
    prog = {"command": [sys.executable, "-c", "import time; time.sleep(30)"], "cwd": str(tmp_path),
            "start_timeout_s": 1}
    with pytest.raises(RequestRefused, match="no progress line 1 s after its start"):
        _call(a, "start_job", job_id="x", family="f", seed=1, program=prog)
    assert "x" not in a.jobs


# -- the scenario side ---------------------------------------------------------------------------

def test_example_scenario_runs_on_sim(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(EXAMPLE / "user_workload.yaml"), "--substrate", "sim", "--out", str(out),
                 "--no-progress"]) == 0
    capsys.readouterr()
    sc = load_scenario(EXAMPLE / "user_workload.yaml").scenario
    prog = sc.workloads.programs["my-mlp"]
    assert prog.cwd == str(EXAMPLE.resolve()) and prog.argv()[0] == sys.executable
    import pandas as pd

    m = pd.read_parquet(out / "energy_only" / "migrations.parquet")
    assert len(m) == 1 and m["predicted_total_s"].notna().all()


@pytest.mark.parametrize("programs, expected", [
    ({"f": {"command": ["x"], "callable": "m:f"}}, "workloads.programs.f: give 'command' or 'callable', one of them"),
    ({"f": {}}, "workloads.programs.f: give 'command' or 'callable', one of them"),
    ({"nope": {"command": ["x"]}}, "programs: no job or mix entry has family 'nope'"),
    ({"f": {"command": ["x"], "env": {"TESTBED_CKPT_PATH": "/x"}}}, "env: TESTBED_CKPT_PATH is set by the agent"),
    ({"f": {"callable": "not a callable"}}, "workloads.programs.f.callable: "),
    ({"f": {"command": []}}, "workloads.programs.f.command: "),
])
def test_bad_programs_name_the_field(tmp_path, capsys, programs, expected):
    d = small_scenario_dict()
    d["workloads"]["jobs"][0]["family"] = "f"
    d["workloads"]["programs"] = programs
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err


def test_relative_cwd_is_from_the_scenario_folder(tmp_path):
    d = small_scenario_dict()
    d["workloads"]["jobs"][0]["family"] = "f"
    d["workloads"]["programs"] = {"f": {"command": ["{python}", "t.py"], "cwd": "sub"}}
    d["emulation"] = {"nodes": "agents"}
    sc = scenario_from_dict(d, tmp_path)
    assert sc.workloads.programs["f"].cwd == str((tmp_path / "sub").resolve())
    again = scenario_from_dict(json.loads(json.dumps(sc.model_dump(mode="json"))), tmp_path / "elsewhere")
    assert again.workloads.programs["f"].cwd == str((tmp_path / "sub").resolve())  # absolute stays


@pytest.mark.parametrize("emulation, expected", [
    ({}, "workloads.programs: programs run on node agents: set emulation.nodes: agents (it is 'ballast')"),
])
def test_programs_need_agents(tmp_path, capsys, emulation, expected):  # either runtime (docker: in the site's image)
    d = small_scenario_dict(emulation=emulation)
    d["workloads"]["jobs"][0]["family"] = "f"
    d["workloads"]["programs"] = {"f": {"command": ["x"]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["validate", str(path)]) == 2
    assert expected in capsys.readouterr().err
