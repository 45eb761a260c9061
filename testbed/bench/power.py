"""``testbed bench power``: does the closed-loop throttle slow real training as the profile predicts?

For a profile and a few caps: real, unpaced training (one torch thread) runs in a fresh worker
process per repeat, under the agent's own mechanism: a :class:`~testbed.agent.runner.JobRunner`
(closed loop, :mod:`testbed.power.throttle.rate_control`) whose training thread is alone in a CPU throttle
(:mod:`testbed.power.throttle.throttle`, made by the worker itself, its cgroup listed in the run's state
file by the bench first). Once warm, the bench alternates the worker's requested fraction between
1 (the reference: unthrottled) and ``throughput_frac(cap)``, in phases of ``phase_s`` (order ref,
cap, cap, ref, ..., so a linear drift cancels), and counts the steps of each phase after a short
settle. Predicted steps/s at the cap = the reference phases' steps/s x ``throughput_frac(cap)``;
target: every cap within 10 %. Pairing each cap with its own interleaved reference keeps a busy
neighbour on a shared host from posing as a throttle error. The controller itself never sees the
bench's numbers: it re-estimates the reference from its own unthrottled windows and step times.

``repeat``: the whole bench that many times in a row (a fresh worker each time); the
result reports every repeat and the spread of each cap's error over them, and passes only if
every cap of every repeat does. ``background_load``: that many CPU-bound processes (plain busy
loops) run beside the bench from start to end, started by it and ended by their PIDs on every
exit path, to show the loop holds on a busy host.

The worker publishes its step count in a small shared file (read by the bench at phase
boundaries) and reads its requested fraction from the same file; its CPU time comes from
``/proc/<pid>/stat``. Each worker is ended on every exit path; its cgroup goes with it (the
worker's throttle is closed when it stops, ``testbed clean`` removes it if the worker is killed).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.errors import TestbedError
from testbed.power.gpu.profile import PowerProfile, load_profile

TARGET_ERROR_PCT = 10.0
DEFAULT_FAMILY = "cnn-digits"
START_TIMEOUT_S = 120.0
MAX_BACKGROUND_LOAD = 16
_SLOT = struct.Struct("<qd")  # steps done (worker writes), requested frac (bench writes)
_STOP = -1.0


class BenchError(TestbedError):
    """A bench worker failed or did not answer in time."""


def default_caps(profile: PowerProfile, n: int) -> list[float]:
    """``n`` caps evenly spaced over [min_w, max_w] (both ends included)."""
    if n < 2:
        return [profile.max_w]
    return [round(profile.min_w + i * (profile.max_w - profile.min_w) / (n - 1), 1) for i in range(n)]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def _wait_ready(proc: subprocess.Popen) -> dict:
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline().decode().strip() if ready else ""  # type: ignore[union-attr]
    if not line.startswith("ready "):
        err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""  # type: ignore[union-attr]
        raise BenchError(f"bench worker did not start within {START_TIMEOUT_S:g} s"
                         + (f": {err.strip()[-500:]}" if err else ""))
    return json.loads(line[len("ready "):])


@contextlib.contextmanager
def background_load(n: int):
    """``n`` CPU-bound processes (busy loops) for the duration; ended by PID on every exit path."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait(timeout=10)


def measure(fracs: list[float], *, family: str, warmup_s: float, phase_s: float, pairs: int,
            settle_s: float = 0.2, seed: int = 0, run_id: str, tag: str,
            prefer: str | None = None) -> tuple[list[dict], dict]:
    """One worker; for each of ``fracs`` in turn, asked alternately for frac 1 and that fraction;
    steps/s and CPU of each phase kind per fraction, and the worker's throttle."""
    with tempfile.NamedTemporaryFile(prefix="tb-bench-power-", suffix=".slot") as f:
        f.write(_SLOT.pack(0, 1.0))
        f.flush()
        with mmap.mmap(f.fileno(), _SLOT.size) as slot:
            proc = subprocess.Popen(
                [sys.executable, "-m", "testbed.bench.power", "--worker", family, str(seed), f.name,
                 run_id, tag, prefer or "auto"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                info = _wait_ready(proc)
                struct.pack_into("<d", slot, 8, 1.0)
                time.sleep(warmup_s)
                return [_phases(proc, slot, x, phase_s, pairs, settle_s) for x in fracs], info
            finally:
                if proc.poll() is None:
                    struct.pack_into("<d", slot, 8, _STOP)
                    try:
                        proc.wait(timeout=10)  # the worker closes its throttle (removes its cgroup)
                    except subprocess.TimeoutExpired:
                        pass
                _end(proc)


def _phases(proc, slot, frac, phase_s, pairs, settle_s) -> dict:
    def ask(x: float) -> None:
        struct.pack_into("<d", slot, 8, x)  # never touch the step count

    acc = {"ref": [0, 0.0, 0.0], "cap": [0, 0.0, 0.0]}  # steps, seconds, cpu seconds
    per_phase: list[dict] = []
    order = [p for i in range(pairs) for p in (("ref", "cap") if i % 2 == 0 else ("cap", "ref"))]
    for phase in order:
        ask(1.0 if phase == "ref" else frac)
        time.sleep(settle_s)
        s0, t0, c0 = _SLOT.unpack_from(slot)[0], time.perf_counter(), _cpu_s(proc.pid)
        time.sleep(phase_s - settle_s)
        s1, t1, c1 = _SLOT.unpack_from(slot)[0], time.perf_counter(), _cpu_s(proc.pid)
        if proc.poll() is not None:
            raise BenchError(f"bench worker exited ({proc.returncode}): "
                             f"{proc.stderr.read().decode(errors='replace').strip()[-500:]}")
        a = acc[phase]
        a[0], a[1], a[2] = a[0] + s1 - s0, a[1] + t1 - t0, a[2] + c1 - c0
        per_phase.append({"phase": phase, "steps_per_s": (s1 - s0) / (t1 - t0)})
    out: dict = {p: {"steps": a[0], "seconds": a[1], "steps_per_s": a[0] / a[1], "cpu_cores": a[2] / a[1]}
                 for p, a in acc.items()}
    out["per_phase"] = per_phase
    return out


def _listed_cgroups(run_id: str, tags: list[str]):
    """As root, list the workers' cgroups in the run's state file while the bench runs, so that
    `testbed clean` removes them if a worker is killed (not root: no cgroup, no state file)."""
    if os.geteuid() != 0:
        return contextlib.nullcontext()
    from testbed.netem.owned import state
    from testbed.power.throttle.cgroups import cgroup_name

    return state.listed(run_id, cgroups=[cgroup_name(run_id, t) for t in tags])


def run_once(prof: PowerProfile, caps: list[float], *, family: str, timing: dict, prefer: str | None,
             run_id: str, repeat_index: int = 0) -> list[dict]:
    fracs = [prof.throughput_frac(cap) for cap in caps]
    measured, info = measure(fracs, family=family, run_id=run_id, tag=_tag(repeat_index),
                             prefer=prefer, **timing)
    rows = []
    for cap, frac, m in zip(caps, fracs, measured):
        pred = m["ref"]["steps_per_s"] * frac
        err = 100.0 * (m["cap"]["steps_per_s"] - pred) / pred
        rows.append({"cap_w": cap, "predicted_frac": frac,
                     "reference_steps_per_s": m["ref"]["steps_per_s"],
                     "predicted_steps_per_s": pred, "measured_steps_per_s": m["cap"]["steps_per_s"],
                     "measured_frac": m["cap"]["steps_per_s"] / m["ref"]["steps_per_s"],
                     "error_pct": err, "cpu_cores_used": m["cap"]["cpu_cores"],
                     "reference_cpu_cores": m["ref"]["cpu_cores"], "phases": m,
                     "draw_w": prof.draw_w(cap), "throttle": info["throttle"],
                     "throttle_reason": info.get("throttle_reason", ""),
                     "pass": abs(err) <= TARGET_ERROR_PCT})
    return rows


def _tag(repeat_index: int) -> str:
    return f"bench-power-{repeat_index}"


def spread(repeats: list[list[dict]]) -> list[dict]:
    """Per cap: the error over the repeats (min, max, mean, standard deviation)."""
    out = []
    for i, row in enumerate(repeats[0]):
        errs = [rows[i]["error_pct"] for rows in repeats]
        out.append({"cap_w": row["cap_w"], "errors_pct": errs, "min_pct": min(errs), "max_pct": max(errs),
                    "mean_pct": statistics.fmean(errs),
                    "stdev_pct": statistics.stdev(errs) if len(errs) > 1 else 0.0,
                    "max_abs_pct": max(abs(e) for e in errs),
                    "passed": sum(1 for rows in repeats if rows[i]["pass"]), "repeats": len(errs)})
    return out


def run(out_dir: Path, *, profile: str | Path = "rtx4090", caps_w: list[float] | None = None,
        n_caps: int = 5, family: str = DEFAULT_FAMILY, quick: bool = False,
        prefer: str | None = None, run_id: str | None = None, repeat: int = 1,
        background: int = 0) -> dict:
    from testbed.netem.owned.naming import new_run_id

    prof = load_profile(profile)
    caps = sorted(caps_w) if caps_w else default_caps(prof, 3 if quick else n_caps)
    timing = {"warmup_s": 0.5, "phase_s": 0.6, "pairs": 3, "settle_s": 0.1} if quick else \
        {"warmup_s": 1.0, "phase_s": 0.6, "pairs": 8, "settle_s": 0.1}
    t_start = time.perf_counter()
    rid = run_id or new_run_id()
    tags = [_tag(r) for r in range(repeat)]
    repeats: list[list[dict]] = []
    with _listed_cgroups(rid, tags), background_load(background) as load_pids:
        for r in range(repeat):
            repeats.append(run_once(prof, caps, family=family, timing=timing, prefer=prefer,
                                    run_id=rid, repeat_index=r))
    rows = repeats[-1]
    result = {
        "bench": "power", "profile": prof.name, "family": family, "quick": quick, **timing,
        "throttle": rows[0]["throttle"], "throttle_reason": rows[0]["throttle_reason"],
        "target_error_pct": TARGET_ERROR_PCT, "repeat": repeat, "background_load": background,
        "background_pids": load_pids, "host_cpus": os.cpu_count(),
        "rows": rows, "repeats": repeats, "spread": spread(repeats),
        "passed_repeats": sum(1 for rs in repeats if all(r["pass"] for r in rs)),
        "pass": all(r["pass"] for rs in repeats for r in rs), "wall_s": time.perf_counter() - t_start,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "power.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (out_dir / "power.md").write_text(render(result))
    return result


def render(result: dict) -> str:
    bg = result.get("background_load", 0)
    lines = [
        f"# bench power: profile {result['profile']}, {result['family']}, throttle {result['throttle']}",
        "",
        f"One worker per repeat (the agent's closed-loop JobRunner); each cap: {result['pairs']} pairs of "
        f"{result['phase_s']:g} s phases alternating frac 1 (reference) and the cap's fraction (the first "
        f"{result['settle_s']:g} s of a phase not counted), after a {result['warmup_s']:g} s warm-up. "
        f"Repeats: {result['repeat']}; CPU-bound background processes: {bg} (host CPUs: {result['host_cpus']}).",
        "",
        f"## Last repeat ({result['repeat']} of {result['repeat']})",
        "",
        "| cap_w | predicted frac | reference steps/s | predicted steps/s | measured steps/s | measured frac "
        "| error % | CPU cores used | throttle | modelled draw_w |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    lines += [f"| {r['cap_w']:g} | {r['predicted_frac']:.3f} | {r['reference_steps_per_s']:.1f} | "
              f"{r['predicted_steps_per_s']:.1f} | {r['measured_steps_per_s']:.1f} | {r['measured_frac']:.3f} | "
              f"{r['error_pct']:+.1f} | {r['cpu_cores_used']:.3f} | {r['throttle']} | {r['draw_w']:.0f} |"
              for r in result["rows"]]
    lines += ["", f"## Spread over {result['repeat']} repeat(s): error % per cap", "",
              "| cap_w | min | mean | max | stdev | passed | every repeat's error % |",
              "|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {s['cap_w']:g} | {s['min_pct']:+.1f} | {s['mean_pct']:+.1f} | {s['max_pct']:+.1f} | "
              f"{s['stdev_pct']:.1f} | {s['passed']}/{s['repeats']} | "
              f"{', '.join(f'{e:+.1f}' for e in s['errors_pct'])} |" for s in result["spread"]]
    lines += ["", f"target: every cap within {result['target_error_pct']:g} % of the prediction, in every repeat; "
              f"repeats passed: {result['passed_repeats']}/{result['repeat']}; "
              f"verdict: {'PASS' if result['pass'] else 'FAIL'} (wall {result['wall_s']:.0f} s)"]
    if result["throttle_reason"]:
        lines += ["", f"throttle fallback: {result['throttle_reason']}"]
    return "\n".join(lines) + "\n"


def _worker(family: str, seed: int, slot_path: str, run_id: str, tag: str, prefer: str) -> int:
    """Build the job, start it in a JobRunner, throttle its thread, say ``ready``, then follow the
    slot's requested frac until it says stop, publishing the step count."""
    from testbed.agent.runner import JobRunner
    from testbed.nodes.job import TrainingJob
    from testbed.power.throttle.throttle import KIND_DUTY, DutyCycleThrottle, make_throttle

    job = TrainingJob.create(family, seed)
    job.step()
    runner = JobRunner(job, steps_per_s=None, max_steps=None)
    runner.start()
    throttle = DutyCycleThrottle() if prefer == KIND_DUTY else \
        make_throttle(run_id, tag, threads=True, prefer=None if prefer == "auto" else prefer)
    try:
        throttle.add_tid(runner.native_id)
        if throttle.kind != KIND_DUTY:
            throttle.prioritise()  # a busy neighbour must not pose as the throttle
        elif os.geteuid() == 0:
            os.setpriority(os.PRIO_PROCESS, 0, -20)
        runner.set_throughput(1.0, throttle)
    except BaseException:
        if runner.throttle is not throttle:
            throttle.close()
        runner.stop()
        raise
    try:
        with open(slot_path, "r+b") as f, mmap.mmap(f.fileno(), _SLOT.size) as slot:
            print("ready " + json.dumps({"throttle": throttle.kind, "throttle_reason": throttle.reason}),
                  flush=True)
            current = 1.0
            while True:
                frac = _SLOT.unpack_from(slot)[1]
                if frac == _STOP:
                    return 0
                if runner.error:
                    print(runner.error, file=sys.stderr)
                    return 1
                if frac != current and 0 < frac <= 1:
                    runner.set_throughput(frac)
                    current = frac
                struct.pack_into("<q", slot, 0, job.steps_done)
                time.sleep(0.005)
    finally:
        runner.stop()  # closes the throttle: the cgroup is removed


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]))
    sys.exit("usage: python -m testbed.bench.power --worker FAMILY SEED SLOT_FILE RUN_ID TAG THROTTLE")
