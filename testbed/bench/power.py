"""``testbed bench power``: does the CPU throttle slow real training as the power profile predicts?

For a profile and a few caps: real, unpaced training (one torch thread) runs in a fresh worker
process per cap. Once warm, the bench alternates the worker's throttle
(:mod:`testbed.power.throttle`) between one full core (the reference) and
``throughput_frac(cap)`` of a core, in phases of about a second (order ref, cap, cap, ref, ...,
so a linear drift cancels), and counts the steps of each phase after a short settle. Predicted
steps/s at the cap = the reference phases' steps/s x ``throughput_frac(cap)``; target: every cap
within 10 %. Pairing each cap with its own interleaved reference keeps a busy neighbour on a
shared host from posing as a throttle error; the reference of every cap is in the table.

The worker publishes its step count in a small shared file (read by the bench, which is never
throttled, at phase boundaries); its CPU time comes from ``/proc/<pid>/stat``. Duty-cycle
throttles run inside the worker, which reads its target from the same file. Each worker is
ended on every exit path; the throttle's cgroup is removed when the bench ends.
"""

from __future__ import annotations

import json
import mmap
import os
import select
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.errors import TestbedError
from testbed.power.profile import PowerProfile, load_profile
from testbed.power.throttle import KIND_DUTY, DutyCycleThrottle, Throttle, make_throttle

TARGET_ERROR_PCT = 10.0
DEFAULT_FAMILY = "cnn-digits"
START_TIMEOUT_S = 120.0
_SLOT = struct.Struct("<qd")  # steps done (worker writes), cores for duty-cycle (bench writes)
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


def _wait_ready(proc: subprocess.Popen) -> None:
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline().decode().strip() if ready else ""  # type: ignore[union-attr]
    if line != "ready":
        err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""  # type: ignore[union-attr]
        raise BenchError(f"bench worker did not start within {START_TIMEOUT_S:g} s"
                         + (f": {err.strip()[-500:]}" if err else ""))


def measure(throttle: Throttle, cores: float, *, family: str, warmup_s: float, phase_s: float,
            pairs: int, settle_s: float = 0.2, seed: int = 0) -> dict:
    """One worker, throttled alternately to 1 core and to ``cores``; steps/s and CPU of each."""
    with tempfile.NamedTemporaryFile(prefix="tb-bench-power-", suffix=".slot") as f:
        f.write(bytes(_SLOT.size))
        f.flush()
        with mmap.mmap(f.fileno(), _SLOT.size) as slot:
            proc = subprocess.Popen(
                [sys.executable, "-m", "testbed.bench.power", "--worker", family, str(seed), f.name],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                return _phases(proc, slot, throttle, cores, warmup_s, phase_s, pairs, settle_s)
            finally:
                if proc.poll() is None:
                    struct.pack_into("<d", slot, 8, _STOP)
                    try:
                        proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                _end(proc)


def _phases(proc, slot, throttle, cores, warmup_s, phase_s, pairs, settle_s) -> dict:
    _wait_ready(proc)
    duty = throttle.kind == KIND_DUTY

    def limit(c: float) -> None:
        if duty:
            struct.pack_into("<d", slot, 8, 0.0 if c >= 1.0 else c)  # never touch the step count
        else:
            throttle.set_cores(c)

    if not duty:
        throttle.add_pid(proc.pid)
        throttle.prioritise()
    elif os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, proc.pid, -20)  # the same precedence, for a plain process
    limit(1.0)
    time.sleep(warmup_s)
    acc = {"ref": [0, 0.0, 0.0], "cap": [0, 0.0, 0.0]}  # steps, seconds, cpu seconds
    order = [p for i in range(pairs) for p in (("ref", "cap") if i % 2 == 0 else ("cap", "ref"))]
    for phase in order:
        limit(1.0 if phase == "ref" else cores)
        time.sleep(settle_s)
        s0, t0, c0 = _SLOT.unpack_from(slot)[0], time.perf_counter(), _cpu_s(proc.pid)
        time.sleep(phase_s - settle_s)
        s1, t1, c1 = _SLOT.unpack_from(slot)[0], time.perf_counter(), _cpu_s(proc.pid)
        if proc.poll() is not None:
            raise BenchError(f"bench worker exited ({proc.returncode}): "
                             f"{proc.stderr.read().decode(errors='replace').strip()[-500:]}")
        a = acc[phase]
        a[0], a[1], a[2] = a[0] + s1 - s0, a[1] + t1 - t0, a[2] + c1 - c0
    return {p: {"steps": a[0], "seconds": a[1], "steps_per_s": a[0] / a[1], "cpu_cores": a[2] / a[1]}
            for p, a in acc.items()}


def _listed_cgroup(run_id: str, tag: str):
    """As root, list the throttle's cgroup in the run's state file while the bench runs, so that
    `testbed clean` removes it if the bench is killed (not root: no cgroup, no state file)."""
    import contextlib
    import os

    if os.geteuid() != 0:
        return contextlib.nullcontext()
    from testbed.netem import state
    from testbed.power.cgroups import cgroup_name

    return state.listed(run_id, cgroups=[cgroup_name(run_id, tag)])


def run(out_dir: Path, *, profile: str | Path = "rtx4090", caps_w: list[float] | None = None,
        n_caps: int = 5, family: str = DEFAULT_FAMILY, quick: bool = False,
        prefer: str | None = None, run_id: str | None = None) -> dict:
    from testbed.netem.naming import new_run_id

    prof = load_profile(profile)
    caps = sorted(caps_w) if caps_w else default_caps(prof, 3 if quick else n_caps)
    timing = {"warmup_s": 0.5, "phase_s": 0.6, "pairs": 3, "settle_s": 0.1} if quick else \
        {"warmup_s": 1.0, "phase_s": 0.6, "pairs": 8, "settle_s": 0.1}
    t_start = time.perf_counter()
    rows = []
    rid = run_id or new_run_id()
    with _listed_cgroup(rid, "bench-power"), make_throttle(rid, "bench-power", prefer=prefer) as th:
        for cap in caps:
            frac = prof.throughput_frac(cap)
            m = measure(th, frac, family=family, **timing)
            pred = m["ref"]["steps_per_s"] * frac
            err = 100.0 * (m["cap"]["steps_per_s"] - pred) / pred
            rows.append({"cap_w": cap, "predicted_frac": frac, "cores": frac,
                         "reference_steps_per_s": m["ref"]["steps_per_s"],
                         "predicted_steps_per_s": pred, "measured_steps_per_s": m["cap"]["steps_per_s"],
                         "error_pct": err, "cpu_cores_used": m["cap"]["cpu_cores"],
                         "reference_cpu_cores": m["ref"]["cpu_cores"], "phases": m,
                         "draw_w": prof.draw_w(cap), "throttle": th.kind,
                         "pass": abs(err) <= TARGET_ERROR_PCT})
        kind, reason = th.kind, th.reason
    result = {
        "bench": "power", "profile": prof.name, "family": family, "quick": quick, **timing,
        "throttle": kind, "throttle_reason": reason, "target_error_pct": TARGET_ERROR_PCT,
        "rows": rows, "pass": all(r["pass"] for r in rows), "wall_s": time.perf_counter() - t_start,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "power.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (out_dir / "power.md").write_text(render(result))
    return result


def render(result: dict) -> str:
    lines = [
        f"# bench power: profile {result['profile']}, {result['family']}, throttle {result['throttle']}",
        "",
        f"Each cap: one worker, {result['pairs']} pairs of {result['phase_s']:g} s phases alternating "
        "1 core (reference) and the cap's fraction of a core (the first "
        f"{result['settle_s']:g} s of a phase not counted), after a {result['warmup_s']:g} s warm-up.",
        "",
        "| cap_w | predicted frac | reference steps/s | predicted steps/s | measured steps/s | error % "
        "| CPU cores used | throttle | modelled draw_w |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    lines += [f"| {r['cap_w']:g} | {r['predicted_frac']:.3f} | {r['reference_steps_per_s']:.1f} | "
              f"{r['predicted_steps_per_s']:.1f} | {r['measured_steps_per_s']:.1f} | {r['error_pct']:+.1f} | "
              f"{r['cpu_cores_used']:.3f} | {r['throttle']} | {r['draw_w']:.0f} |" for r in result["rows"]]
    lines += ["", f"target: every cap within {result['target_error_pct']:g} % of the prediction; "
              f"verdict: {'PASS' if result['pass'] else 'FAIL'} (wall {result['wall_s']:.0f} s)"]
    if result["throttle_reason"]:
        lines += ["", f"throttle fallback: {result['throttle_reason']}"]
    return "\n".join(lines) + "\n"


def _worker(family: str, seed: int, slot_path: str) -> int:
    """Build the job, say ``ready``, then train until the slot says stop, publishing steps."""
    from testbed.nodes.job import TrainingJob

    job = TrainingJob.create(family, seed)
    job.step()
    duty = DutyCycleThrottle()
    with open(slot_path, "r+b") as f, mmap.mmap(f.fileno(), _SLOT.size) as slot:
        print("ready", flush=True)
        steps = 0
        while True:
            cores = _SLOT.unpack_from(slot)[1]
            if cores == _STOP:
                return 0
            duty.set_cores(cores if cores > 0 else None)
            t0 = time.perf_counter()
            job.step()
            duty.after_step(time.perf_counter() - t0)
            steps += 1
            struct.pack_into("<q", slot, 0, steps)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    sys.exit("usage: python -m testbed.bench.power --worker FAMILY SEED SLOT_FILE")
