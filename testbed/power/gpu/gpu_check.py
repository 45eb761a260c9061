"""The GPU check (``scripts/gpu-check.sh``): the NVML power path end to end on a machine with an
NVIDIA GPU, in one command, each step in its own time budget, the whole within :data:`TOTAL_BUDGET_S`.

Steps (each recorded with its verdict, its budget, its wall time and its numbers; a failed step does
not stop the later ones):

1. ``doctor``: ``testbed doctor --json`` sees NVML, at least one GPU, and torch with CUDA.
2. ``calibrate``: ``testbed calibrate power`` at ``n_caps`` (>= 4) caps with real training on the
   GPU: steps/s, drawn power and the enforced limit per cap; the profile it writes is kept.
3. ``scenario``: a one-site scenario whose node type uses that profile and whose renewable trace
   makes the cap move over the GPU's range, run with ``power.backend: nvml`` on the ``local``
   substrate (its node agent a local process training on the GPU: no network namespace needed).
   Every row of its ``power.parquet``: enforced cap = requested cap within ``tolerance_w``. After
   the run: the GPU's limit is the one it had before.
4. ``sigint``: ``testbed calibrate power`` (a CLI process that holds the GPU capped, training)
   started again and interrupted with SIGINT once it has changed the limit; the limit must be back
   to the original once the process has exited. (The scenario run itself is not the one
   interrupted: it has one site, so no migration, and its clock jumps over the idle trace in
   about a second; it would end before a signal could reliably land in it.)
5. ``netns``: the same scenario on the ``netns`` substrate (its agent in a site namespace), where
   this machine can make network namespaces; ``skipped`` (with why) where it cannot.

Verdicts: ``PASS``, ``FAIL``, ``no GPU`` (the step ran and failed because NVML has no usable GPU
here: what a rehearsal without a GPU ends with, tests/integration/test_gpu_check_rehearsal.py) and
``skipped``. Without a GPU every step still runs as far as it can, so an import error or a broken
command shows as ``FAIL``, not hidden behind the missing GPU.

What comes back (``out``, at most 5 small files): ``gpu-check.json`` (everything), ``gpu-check.md``
(the same, to read), ``profile.yaml`` (the calibrated profile), ``logs.txt`` (the tail of each
step's log) and the shell's ``environment.txt``. The steps work in a temporary folder, removed at
the end.

The GPU's limit is read before anything runs and, whatever happens (SIGTERM included), put back at
the end by this check too (an NVML context of its own), so a failed run cannot leave the GPU capped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from testbed.processes import stop_popens

MIN_CAPS = 4
DEFAULT_TOLERANCE_W = 1.0  # NVML takes milliwatts; drivers enforce whole watts or finer
TOTAL_BUDGET_S = 480       # the whole check on one GPU, the shell's setup included (8 minutes)
SETUP_BUDGET_S = 60        # what scripts/gpu-check.sh keeps for itself (bundle install, environment)
BUDGET_S = {"doctor": 40, "scenario": 90, "sigint": 60, "netns": 90}  # calibrate: calibrate_budget_s()
STOP_GRACE_S = 20          # after a budget runs out: SIGTERM, this long to clean up, then SIGKILL
LOG_TAIL_LINES = 60
FALLBACK_PROFILE = "a100-sxm4"  # the scenario's profile when calibration made none (no GPU): the run still starts

PASS, FAIL, NO_GPU, SKIPPED = "PASS", "FAIL", "no GPU", "skipped"
# a step's output that says the GPU is missing, and one that says something else broke first
_NO_GPU_RE = re.compile(r"nvml|no gpu|found no gpu|not usable through nvml|driver", re.I)
_BROKEN_RE = re.compile(r"Traceback \(most recent call last\)|ModuleNotFoundError|ImportError|SyntaxError")

LAUNCHER = [sys.executable, "-m", "testbed"]  # how the testbed CLI is started (tests put a mocked NVML in front)


def _testbed(*args: str) -> list[str]:
    return [*LAUNCHER, *args]


def calibrate_budget_s(n_caps: int, seconds: float) -> float:
    """Start-up (torch, CUDA), the idle reading, then each cap: 2 s of warm-up and ``seconds`` timed."""
    return 60 + 2 + n_caps * (seconds + 2) + 20


def _run(cmd: list[str], timeout_s: float, log: Path) -> subprocess.CompletedProcess:
    """Run ``cmd`` (its output to ``log``) for at most ``timeout_s``; past it, SIGTERM (the CLI puts
    the GPU's limit back and stops its agents), then SIGKILL after :data:`STOP_GRACE_S`. A run that
    had to be stopped returns 124."""
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            f.write(f"\n[gpu-check] stopped: over its budget of {timeout_s:g} s\n")
            code = 124
        finally:  # over budget, or this check itself stopped (SIGTERM): the child goes first
            stop_popens([proc], timeout_s=STOP_GRACE_S, kill_wait_s=30)
    return subprocess.CompletedProcess(cmd, code)


def _tail(log: Path, n: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def step_doctor(out: Path, budget_s: float = BUDGET_S["doctor"]) -> dict:
    log = out / "doctor.log"
    probes = [] if os.geteuid() == 0 else ["--no-root-probes"]  # as root: the netns probe decides the netns step
    with log.open("w") as f:
        try:
            done = subprocess.run(_testbed("doctor", "--json", *probes), stdout=subprocess.PIPE,
                                  stderr=f, timeout=budget_s, check=False, text=True)
        except subprocess.TimeoutExpired:
            return {"ok": False, "detail": f"doctor did not answer within {budget_s:g} s"}
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"ok": False, "detail": f"doctor printed no JSON (exit {done.returncode}): {_tail(log, 3)}"}
    caps = {c.get("name"): c for c in report.get("capabilities", [])}
    nvml, torch, netns = caps.get("nvml", {}), caps.get("torch", {}), caps.get("netns", {})
    gpus = report.get("summary", {}).get("gpus", 0)
    cuda = bool(torch.get("measured", {}).get("cuda"))
    return {"ok": bool(nvml.get("available")) and gpus > 0 and cuda, "gpus": gpus, "cuda": cuda,
            "netns": bool(netns.get("available")), "netns_detail": netns.get("detail", "not reported"),
            "detail": f"nvml: {nvml.get('detail', 'not reported')}; torch: {torch.get('detail', 'not reported')}"}


def step_calibrate(out: Path, *, gpu: int, n_caps: int, seconds: float, family: str,
                   tolerance_w: float, budget_s: float | None = None, device: str | None = None) -> dict:
    import yaml

    profile = out / "profile.yaml"
    log = out / "calibrate.log"
    done = _run(_testbed("calibrate", "power", "--gpu", str(gpu), "--caps", str(n_caps), "--seconds", f"{seconds:g}",
                         "--family", family, "--name", f"gpu{gpu}-gpu-check", "--out", str(profile),
                         *(["--device", device] if device else [])),
                timeout_s=budget_s or calibrate_budget_s(n_caps, seconds), log=log)
    if done.returncode != 0 or not profile.is_file():
        return {"ok": False, "detail": f"calibrate exited {done.returncode}: {_tail(log, 5)}"}
    measured = yaml.safe_load(profile.read_text()).get("measured", {})
    rows = measured.get("rows", [])
    off = [r for r in rows if abs(r["enforced_w"] - r["requested_w"]) > tolerance_w]
    ok = len(rows) >= MIN_CAPS and not off and all(r["steps_per_s"] > 0 for r in rows)
    return {"ok": ok, "profile": str(profile), "rows": rows, "torch_device": measured.get("torch_device"),
            "detail": f"{len(rows)} caps measured" + (f"; {len(off)} not enforced within {tolerance_w:g} W" if off else "")}


def scenario_yaml(profile_path: Path, profile: dict, trace_csv: Path) -> dict:
    """One site, one node of the calibrated GPU, a renewable trace that sweeps its cap."""
    max_draw_kw = max(p[2] for p in profile["points"]) / 1000.0
    host_kw = 0.1
    return {
        "name": "gpu-check", "seed": 1, "duration_h": 2, "step_s": 300,
        "node_types": {"gpu": {"p_active_kw": round(host_kw + max_draw_kw, 4), "p_idle_kw": 0.05,
                               "power_profile": str(profile_path), "source": "testbed calibrate power (gpu-check)"}},
        "sites": [{"name": "a", "lat_deg": 45.0, "lon_deg": 9.0, "nodes": 1, "node_type": "gpu"}],
        "links": [],
        # tcp_congestion host: no link, so nothing to choose, and no system setting to change (one that a
        # network namespace other than the first cannot write: a container's)
        "emulation": {"time_scale": 120, "nodes": "agents", "steps_per_s": 50, "tcp_congestion": "host"},
        "traces": {"renewable": {"a": {"kind": "csv", "file": str(trace_csv)}}},
        "power": {"backend": "nvml", "grid_limit_kw": 0.0},  # only the trace feeds the site: it sets the cap
        "workloads": {"jobs": [{"id": "j1", "checkpoint_gb": 1, "work_gpu_h": 100, "origin": "a",
                                "family": "llama-7b"}]},
        "policies": ["static"],
    }


def write_trace(path: Path, profile: dict) -> list[float]:
    """Renewable kW over 2 h that moves the GPU's budget from its lowest to its highest draw."""
    draws = sorted(p[2] for p in profile["points"])
    lo, hi = draws[0] / 1000.0, draws[-1] / 1000.0
    host = 0.1
    values = [host + lo + f * (hi - lo) for f in (0.1, 0.9, 0.4, 0.7, 0.2, 1.0)]
    path.write_text("timestamp,value\n" + "".join(f"{i * 1200},{v:.4f}\n" for i, v in enumerate(values))
                    + f"{7200},{values[-1]:.4f}\n")
    return values


def check_enforced(power_parquet: Path, tolerance_w: float) -> dict:
    import pandas as pd

    p = pd.read_parquet(power_parquet)
    if p.empty:
        return {"ok": False, "detail": "power.parquet has no rows (no job ran)"}
    diff = (p["cap_enforced_w"] - p["cap_w"]).abs()
    off = p[diff > tolerance_w]
    return {"ok": off.empty and (p["backend"] == "nvml").all(), "rows": len(p),
            "max_abs_diff_w": float(diff.max()), "caps_w": sorted(set(p["cap_w"].round(1))),
            "measured_power_w": [float(x) for x in p["gpu_power_w"].dropna().head(12)],
            "power_basis": sorted(set(p["gpu_power_basis"])),
            "detail": f"{len(p)} steps, max |enforced - requested| {float(diff.max()):.2f} W"
                      + (f"; {len(off)} rows off by more than {tolerance_w:g} W" if not off.empty else "")}


def step_scenario(out: Path, scenario: Path, *, read_limit_mw: Callable[[], int] | None, original_mw: int | None,
                  tolerance_w: float, substrate: str = "netns", budget_s: float = BUDGET_S["scenario"],
                  name: str = "scenario") -> dict:
    log = out / f"{name}.log"
    run_dir = out / f"{name}-run"
    done = _run(_testbed("run", str(scenario), "--substrate", substrate, "--out", str(run_dir), "--no-progress"),
                timeout_s=budget_s, log=log)
    after = read_limit_mw() if read_limit_mw is not None else None
    res: dict = {"substrate": substrate, "exit": done.returncode, "limit_before_mw": original_mw,
                 "limit_after_mw": after, "restored": after == original_mw}
    parquet = run_dir / "static" / "power.parquet"
    if done.returncode != 0 or not parquet.is_file():
        return {**res, "ok": False, "detail": f"run ({substrate}) exited {done.returncode}: {_tail(log, 8)}"}
    enf = check_enforced(parquet, tolerance_w)
    return {**res, **enf, "ok": enf["ok"] and res["restored"],
            "detail": f"{substrate}: " + enf["detail"]
                      + ("" if res["restored"] else f"; limit NOT restored ({after} mW, was {original_mw} mW)")}


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sigint_restores(cmd: list[str], *, read_limit_mw: Callable[[], int], original_mw: int,
                    changed_within_s: float = 300.0, exit_within_s: float = 120.0,
                    log: Path | None = None, poll_s: float = 0.2) -> dict:
    """Start ``cmd``, wait until the GPU's limit differs from ``original_mw`` (the run capped it),
    send SIGINT, wait for the exit: the limit must be ``original_mw`` again. The process is
    ended by its PID if it outlives ``exit_within_s``."""
    sink = log.open("w") if log is not None else subprocess.DEVNULL
    # SIGINT as a terminal's Ctrl-C delivers it, also when this check was started with SIGINT ignored
    # (nohup, cmd &): the child would otherwise inherit the ignored disposition
    proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            preexec_fn=_sigint_default)
    capped_mw = None
    try:
        deadline = time.monotonic() + changed_within_s
        while time.monotonic() < deadline and proc.poll() is None:
            now_mw = read_limit_mw()
            if now_mw != original_mw:
                capped_mw = now_mw
                break
            time.sleep(poll_s)
        if capped_mw is None:
            return {"ok": False, "detail": "the run never changed the limit (nothing to restore)",
                    "exit": proc.poll()}
        os.kill(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=exit_within_s)
        except subprocess.TimeoutExpired:
            return {"ok": False, "detail": f"no exit within {exit_within_s:g} s of SIGINT", "capped_mw": capped_mw}
        after = read_limit_mw()
        return {"ok": after == original_mw, "capped_mw": capped_mw, "limit_after_mw": after,
                "limit_before_mw": original_mw, "exit": code,
                "detail": f"capped at {capped_mw} mW, SIGINT, exit {code}, limit {after} mW "
                          f"({'restored' if after == original_mw else 'NOT restored'}; was {original_mw} mW)"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        if log is not None:
            sink.close()  # type: ignore[union-attr]


def netns_unavailable(doctor: dict) -> str | None:
    """Why this machine cannot make network namespaces (the netns step is skipped), or None: what
    the doctor step's netns probe said (it makes, lists and removes a scratch namespace, as root)."""
    if os.geteuid() != 0:
        return "not root"
    if "netns" not in doctor:
        return f"the doctor step did not say ({doctor.get('detail', '')})"
    return None if doctor["netns"] else f"doctor's netns probe: {doctor.get('netns_detail')}"


def _gpu_identity(dev) -> dict:
    """The GPU's name and the driver's version, as NVML says them (for the committed results)."""
    info: dict = {}
    for key, fn, args in (("name", "nvmlDeviceGetName", (dev._handle,)),
                          ("driver", "nvmlSystemGetDriverVersion", ())):
        try:
            v = getattr(dev._nvml, fn)(*args)
            info[key] = v.decode() if isinstance(v, bytes) else str(v)
        except Exception as e:  # noqa: BLE001
            info[key] = f"unknown ({type(e).__name__})"
    try:
        lim = dev.limits_w()
        info.update(min_w=lim.min_w, max_w=lim.max_w, default_w=lim.default_w)
    except Exception as e:  # noqa: BLE001
        info["limits"] = f"unknown ({e})"
    return info


def _verdict(step: dict, gpu_error: str | None, log: Path | None) -> str:
    if step.get("skipped"):
        return SKIPPED
    if step.get("ok"):
        return PASS
    text = f"{step.get('detail', '')}\n{_tail(log, 200) if log else ''}"
    if gpu_error is not None and not _BROKEN_RE.search(text) and (step.get("no_gpu") or _NO_GPU_RE.search(text)):
        return NO_GPU
    return FAIL


def _timed(fn: Callable[[], dict], budget_s: float) -> dict:
    t0 = time.perf_counter()
    res = fn()
    return {**res, "budget_s": round(budget_s, 1), "wall_s": round(time.perf_counter() - t0, 1)}


def run_check(out: Path, *, gpu: int = 0, n_caps: int = MIN_CAPS, seconds: float = 8.0,
              family: str = "char-transformer", tolerance_w: float = DEFAULT_TOLERANCE_W,
              netns: str = "auto", work: Path | None = None, keep_work: bool = False,
              device: str | None = None) -> dict:
    """The whole check; ``out`` gets the results (few, small files), ``work`` (default: a temporary
    folder, removed at the end unless ``keep_work``) what the steps make. ``netns``: ``auto`` (the
    netns step where namespaces can be made), ``on``, ``off``. ``device``: the torch device the
    calibrations train on (default ``cuda:GPU``; ``cpu`` only to rehearse with NVML mocked)."""
    import yaml

    from testbed.power.errors import PowerError
    from testbed.power.gpu.nvml import NvmlDevice

    t0 = time.perf_counter()
    n_caps = max(MIN_CAPS, n_caps)
    out.mkdir(parents=True, exist_ok=True)
    made_work = work is None
    work = Path(tempfile.mkdtemp(prefix="tb-gpu-check-")) if work is None else work
    work.mkdir(parents=True, exist_ok=True)
    steps: dict[str, dict] = {}
    logs: dict[str, Path] = {}
    budgets = {**BUDGET_S, "calibrate": calibrate_budget_s(n_caps, seconds)}
    dev, original_mw, final_mw, gpu_error, identity = None, None, None, None, {}
    try:
        steps["doctor"] = _timed(lambda: step_doctor(work, budgets["doctor"]), budgets["doctor"])
        logs["doctor"] = work / "doctor.log"
        try:
            dev = NvmlDevice(gpu)
            original_mw = dev.limit_mw()
            identity = _gpu_identity(dev)
        except PowerError as e:  # no GPU here: every step still runs as far as it can, and says so
            gpu_error = f"gpu{gpu} is not usable through NVML ({e})"
            if dev is not None:
                dev.close()
                dev = None
        read_limit = dev.limit_mw if dev is not None else None

        steps["calibrate"] = _timed(lambda: step_calibrate(work, gpu=gpu, n_caps=n_caps, seconds=seconds, family=family,
                                                           tolerance_w=tolerance_w, budget_s=budgets["calibrate"],
                                                           device=device),
                                    budgets["calibrate"])
        logs["calibrate"] = work / "calibrate.log"
        prof_path = Path(steps["calibrate"].get("profile", ""))
        if not prof_path.is_file():  # the scenario still starts (its nvml backend then says why it cannot cap)
            from testbed.power.gpu.profile import load_profile

            prof_path = work / "fallback-profile.yaml"
            prof_path.write_text(yaml.safe_dump(load_profile(FALLBACK_PROFILE).to_dict(), sort_keys=False))
        prof = yaml.safe_load(prof_path.read_text())
        write_trace(work / "renewable.csv", prof)
        scen = work / "scenario.yaml"
        scen.write_text(yaml.safe_dump(scenario_yaml(prof_path, prof, work / "renewable.csv"), sort_keys=False))
        if prof_path.name != "profile.yaml":
            scen_note = f"profile {FALLBACK_PROFILE} (shipped estimate: calibration made none)"
        else:
            scen_note = "the calibrated profile"

        steps["scenario"] = _timed(lambda: step_scenario(work, scen, read_limit_mw=read_limit, original_mw=original_mw,
                                                         tolerance_w=tolerance_w, substrate="local",
                                                         budget_s=budgets["scenario"], name="scenario"),
                                   budgets["scenario"])
        steps["scenario"]["profile_used"] = scen_note
        logs["scenario"] = work / "scenario.log"

        if dev is not None:
            steps["sigint"] = _timed(lambda: sigint_restores(
                _testbed("calibrate", "power", "--gpu", str(gpu), "--caps", str(n_caps), "--seconds", "60",
                         "--family", family, "--out", str(work / "sigint-profile.yaml"),
                         *(["--device", device] if device else [])),
                read_limit_mw=dev.limit_mw, original_mw=original_mw,  # type: ignore[arg-type]
                changed_within_s=budgets["sigint"] - STOP_GRACE_S, exit_within_s=STOP_GRACE_S,
                log=work / "sigint.log"), budgets["sigint"])
        else:
            steps["sigint"] = {"ok": False, "no_gpu": True, "budget_s": budgets["sigint"], "wall_s": 0.0,
                               "detail": f"no limit to change and restore: {gpu_error}"}
        logs["sigint"] = work / "sigint.log"

        why_not = None if netns == "on" else ("--netns off" if netns == "off" else netns_unavailable(steps["doctor"]))
        if why_not is None:
            steps["netns"] = _timed(lambda: step_scenario(work, scen, read_limit_mw=read_limit, original_mw=original_mw,
                                                          tolerance_w=tolerance_w, substrate="netns",
                                                          budget_s=budgets["netns"], name="netns"),
                                    budgets["netns"])
            logs["netns"] = work / "netns.log"
        else:
            steps["netns"] = {"ok": False, "skipped": True, "budget_s": budgets["netns"], "wall_s": 0.0,
                              "detail": f"skipped: network namespaces cannot be made here ({why_not})"}
    finally:
        if dev is not None:
            final_mw = dev.limit_mw()
            if final_mw != original_mw:  # whatever happened above, the GPU is not left capped
                dev.set_limit_mw(original_mw)  # type: ignore[arg-type]
            dev.close()
        _write_logs(out / "logs.txt", logs)
        if (work / "profile.yaml").is_file():
            shutil.copyfile(work / "profile.yaml", out / "profile.yaml")
        if made_work and not keep_work:
            shutil.rmtree(work, ignore_errors=True)
    for name, step in steps.items():
        step["verdict"] = _verdict(step, gpu_error, logs.get(name))
    verdicts = {s["verdict"] for s in steps.values()}
    verdict = FAIL if FAIL in verdicts else NO_GPU if NO_GPU in verdicts else PASS
    return _write(out, {
        "check": "gpu", "at": _now(), "gpu": gpu, "gpu_identity": identity, "gpu_error": gpu_error,
        "python": sys.version.split()[0], "torch": _torch_version(),
        "original_limit_mw": original_mw, "limit_at_end_mw": final_mw, "tolerance_w": tolerance_w,
        "family": family, "device": device or f"cuda:{gpu}", "n_caps": n_caps, "seconds_per_cap": seconds, "budgets_s": budgets,
        "total_budget_s": TOTAL_BUDGET_S, "steps": steps, "verdict": verdict, "pass": verdict == PASS,
        "wall_s": round(time.perf_counter() - t0, 1), "work": str(work) if keep_work or not made_work else None,
    })


def _torch_version() -> str:
    try:
        import torch

        return f"{torch.__version__} (cuda {torch.version.cuda}, available {torch.cuda.is_available()})"
    except Exception as e:  # noqa: BLE001
        return f"not importable ({type(e).__name__}: {e})"


def _write_logs(path: Path, logs: dict[str, Path]) -> None:
    parts = []
    for name, log in logs.items():
        parts.append(f"===== {name}: {log.name} (last {LOG_TAIL_LINES} lines) =====\n{_tail(log, LOG_TAIL_LINES)}\n")
    path.write_text("".join(parts)[-200_000:])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write(out: Path, result: dict) -> dict:
    (out / "gpu-check.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "gpu-check.md").write_text(render(result))
    return result


def render(result: dict) -> str:
    before, after = result["original_limit_mw"], result["limit_at_end_mw"]
    ident = result.get("gpu_identity") or {}
    lines = [f"# GPU check: gpu{result['gpu']} ({result['at']})", "",
             (f"GPU: {ident.get('name', '?')}, driver {ident.get('driver', '?')}. " if ident else
              f"No GPU: {result.get('gpu_error')}. ")
             + f"Python {result.get('python')}, torch {result.get('torch')}.", "",
             (f"Original power limit {before / 1000:g} W; at the end {after / 1000:g} W. "
              if before is not None and after is not None else "No GPU power limit could be read. ")
             + f"Tolerance {result['tolerance_w']:g} W.", "",
             "| step | verdict | wall s (budget) | detail |", "|---|---|---:|---|"]
    for name, s in result["steps"].items():
        verdict = s.get("verdict") or (PASS if s.get("ok") else FAIL)
        detail = " ".join(str(s.get("detail", "")).split()).replace("|", "\\|")
        lines.append(f"| {name} | {verdict} | {s.get('wall_s', '-')} ({s.get('budget_s', '-')}) | {detail[:400]} |")
    cal = result["steps"].get("calibrate", {})
    if cal.get("rows"):
        lines += ["", "Calibration (real training on the GPU):", "",
                  "| requested W | enforced W | mean power W | steps/s |", "|---:|---:|---:|---:|"]
        lines += [f"| {r['requested_w']:g} | {r['enforced_w']:g} | {r['mean_power_w']:.1f} | {r['steps_per_s']:.2f} |"
                  for r in cal["rows"]]
    verdict = result.get("verdict") or (PASS if result["pass"] else FAIL)
    lines += ["", f"verdict: {verdict} (wall {result['wall_s']:.0f} s; budget {result.get('total_budget_s', '-')} s)"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from testbed.recorder.out_dir import results_root

    p = argparse.ArgumentParser(prog="python -m testbed.power.gpu.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=results_root() / "gpu-check")
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--caps", type=int, default=MIN_CAPS)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--family", default="char-transformer")
    p.add_argument("--netns", choices=("auto", "on", "off"), default="auto",
                   help="the netns step: where namespaces can be made (auto), always, never")
    p.add_argument("--work", type=Path, default=None, help="where the steps work (default: a temporary folder)")
    p.add_argument("--keep-work", action="store_true", help="keep the temporary folder")
    p.add_argument("--device", default=None, help="torch device of the calibrations (default cuda:GPU; cpu to rehearse)")
    a = p.parse_args(argv)
    if a.caps < MIN_CAPS:
        print(f"error: --caps: at least {MIN_CAPS}", file=sys.stderr)
        return 2
    # a SIGTERM (the shell's overall timeout) unwinds through run_check's finally: the limit goes back
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    res = run_check(a.out, gpu=a.gpu, n_caps=a.caps, seconds=a.seconds, family=a.family, netns=a.netns,
                    work=a.work, keep_work=a.keep_work, device=a.device)
    print((a.out / "gpu-check.md").read_text())
    print(f"written: {', '.join(str(f) for f in sorted(a.out.iterdir()))}")
    return {PASS: 0, NO_GPU: 3}.get(res["verdict"], 1)


if __name__ == "__main__":
    sys.exit(main())
