"""The GPU check (``scripts/gpu-check.sh``): the NVML power path end to end on a machine with an
NVIDIA GPU, in one command, written to one JSON and one Markdown file.

Steps (each recorded with its verdict and numbers; a failed step does not stop the later ones,
except where a later one needs what it makes):

1. ``doctor``: ``testbed doctor --json`` sees NVML, at least one GPU, and torch with CUDA.
2. ``calibrate``: ``testbed calibrate power`` at ``n_caps`` (>= 4) caps with real training on the
   GPU: steps/s, drawn power and the enforced limit per cap; the profile it writes is kept.
3. ``scenario``: a one-site scenario whose node type uses that profile and whose renewable trace
   makes the cap move over the GPU's range, run with ``power.backend: nvml`` (real training on the
   GPU through a node agent). Every row of its ``power.parquet``: enforced cap = requested cap
   within the driver's granularity (``tolerance_w``). After the run: the GPU's limit is the one it
   had before.
4. ``sigint``: ``testbed calibrate power`` (a CLI process that holds the GPU capped for minutes,
   training) started again and interrupted with SIGINT once it has changed the limit; the limit
   must be back to the original once the process has exited. (The scenario run itself is not the
   one interrupted: with one GPU it has one site, so no migration, and its clock jumps over the
   idle trace in about a second; it would end before a signal could reliably land in it.)

The GPU's limit is read before anything runs and, whatever happens, put back at the end by this
check too (an NVML context of its own), so a failed run cannot leave the GPU capped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

MIN_CAPS = 4
DEFAULT_TOLERANCE_W = 1.0  # NVML takes milliwatts; drivers enforce whole watts or finer


LAUNCHER = [sys.executable, "-m", "testbed"]  # how the testbed CLI is started (tests put a mocked NVML in front)


def _testbed(*args: str) -> list[str]:
    return [*LAUNCHER, *args]


def _run(cmd: list[str], timeout_s: float, log: Path) -> subprocess.CompletedProcess:
    with log.open("w") as f:
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)


def _tail(log: Path, n: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def step_doctor(out: Path) -> dict:
    log = out / "doctor.log"
    with log.open("w") as f:
        done = subprocess.run(_testbed("doctor", "--json", "--no-root-probes"), stdout=subprocess.PIPE,
                              stderr=f, timeout=300, check=False, text=True)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"ok": False, "detail": f"doctor printed no JSON (exit {done.returncode})"}
    caps = {c.get("name"): c for c in report.get("capabilities", [])}
    nvml, torch = caps.get("nvml", {}), caps.get("torch", {})
    gpus = report.get("summary", {}).get("gpus", 0)
    cuda = bool(torch.get("measured", {}).get("cuda"))
    return {"ok": bool(nvml.get("available")) and gpus > 0 and cuda, "gpus": gpus, "cuda": cuda,
            "detail": f"nvml: {nvml.get('detail', 'not reported')}; torch: {torch.get('detail', 'not reported')}"}


def step_calibrate(out: Path, *, gpu: int, n_caps: int, seconds: float, family: str,
                   tolerance_w: float) -> dict:
    import yaml

    profile = out / "profile.yaml"
    log = out / "calibrate.log"
    done = _run(_testbed("calibrate", "power", "--gpu", str(gpu), "--caps", str(n_caps), "--seconds", f"{seconds:g}",
                         "--family", family, "--name", f"gpu{gpu}-gpu-check", "--out", str(profile)),
                timeout_s=n_caps * (seconds + 60) + 300, log=log)
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
        "emulation": {"time_scale": 120, "nodes": "agents", "steps_per_s": 50},
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


def step_scenario(out: Path, scenario: Path, *, read_limit_mw: Callable[[], int], original_mw: int,
                  tolerance_w: float, substrate: str = "netns") -> dict:
    log = out / "scenario.log"
    run_dir = out / "scenario-run"
    done = _run(_testbed("run", str(scenario), "--substrate", substrate, "--out", str(run_dir), "--no-progress"),
                timeout_s=900, log=log)
    after = read_limit_mw()
    res: dict = {"exit": done.returncode, "limit_before_mw": original_mw, "limit_after_mw": after,
                 "restored": after == original_mw}
    parquet = run_dir / "static" / "power.parquet"
    if done.returncode != 0 or not parquet.is_file():
        return {**res, "ok": False, "detail": f"run exited {done.returncode}: {_tail(log, 8)}"}
    enf = check_enforced(parquet, tolerance_w)
    return {**res, **enf, "ok": enf["ok"] and res["restored"],
            "detail": enf["detail"] + ("" if res["restored"] else f"; limit NOT restored ({after} mW, was {original_mw} mW)")}


def sigint_restores(cmd: list[str], *, read_limit_mw: Callable[[], int], original_mw: int,
                    changed_within_s: float = 300.0, exit_within_s: float = 120.0,
                    log: Path | None = None, poll_s: float = 0.2) -> dict:
    """Start ``cmd``, wait until the GPU's limit differs from ``original_mw`` (the run capped it),
    send SIGINT, wait for the exit: the limit must be ``original_mw`` again. The process is
    ended by its PID if it outlives ``exit_within_s``."""
    sink = log.open("w") if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
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


def run_check(out: Path, *, gpu: int = 0, n_caps: int = MIN_CAPS, seconds: float = 8.0,
              family: str = "char-transformer", tolerance_w: float = DEFAULT_TOLERANCE_W,
              substrate: str = "netns") -> dict:
    import yaml

    from testbed.power.errors import PowerError
    from testbed.power.nvml import NvmlDevice

    out.mkdir(parents=True, exist_ok=True)
    steps: dict[str, dict] = {}
    t0 = time.perf_counter()
    steps["doctor"] = step_doctor(out)
    try:
        dev = NvmlDevice(gpu)
        original_mw = dev.limit_mw()
    except PowerError as e:  # no GPU here: said so in the result, nothing else can run
        for name in ("calibrate", "scenario", "sigint"):
            steps[name] = {"ok": False, "detail": f"skipped: gpu{gpu} is not usable through NVML ({e})"}
        return _write(out, {"check": "gpu", "at": _now(), "gpu": gpu, "original_limit_mw": None,
                            "limit_at_end_mw": None, "tolerance_w": tolerance_w, "family": family,
                            "seconds_per_cap": seconds, "substrate": substrate, "steps": steps,
                            "pass": False, "wall_s": time.perf_counter() - t0})
    try:
        steps["calibrate"] = step_calibrate(out, gpu=gpu, n_caps=max(MIN_CAPS, n_caps), seconds=seconds,
                                            family=family, tolerance_w=tolerance_w)
        prof_path = Path(steps["calibrate"].get("profile", ""))
        if prof_path.is_file():
            prof = yaml.safe_load(prof_path.read_text())
            write_trace(out / "renewable.csv", prof)
            scen = out / "scenario.yaml"
            scen.write_text(yaml.safe_dump(scenario_yaml(prof_path, prof, out / "renewable.csv"), sort_keys=False))
            steps["scenario"] = step_scenario(out, scen, read_limit_mw=dev.limit_mw, original_mw=original_mw,
                                              tolerance_w=tolerance_w, substrate=substrate)
            steps["sigint"] = sigint_restores(
                _testbed("calibrate", "power", "--gpu", str(gpu), "--caps", str(max(MIN_CAPS, n_caps)),
                         "--seconds", "60", "--family", family, "--out", str(out / "sigint-profile.yaml")),
                read_limit_mw=dev.limit_mw, original_mw=original_mw, log=out / "sigint.log")
        else:
            steps["scenario"] = steps["sigint"] = {"ok": False, "detail": "skipped: no calibrated profile"}
    finally:
        final_mw = dev.limit_mw()
        if final_mw != original_mw:  # whatever happened above, the GPU is not left capped
            dev.set_limit_mw(original_mw)
        dev.close()
    return _write(out, {
        "check": "gpu", "at": _now(), "gpu": gpu,
        "original_limit_mw": original_mw, "limit_at_end_mw": final_mw, "tolerance_w": tolerance_w,
        "family": family, "seconds_per_cap": seconds, "substrate": substrate, "steps": steps,
        "pass": all(s.get("ok") for s in steps.values()), "wall_s": time.perf_counter() - t0,
    })


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write(out: Path, result: dict) -> dict:
    (out / "gpu-check.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "gpu-check.md").write_text(render(result))
    return result


def render(result: dict) -> str:
    before, after = result["original_limit_mw"], result["limit_at_end_mw"]
    lines = [f"# GPU check: gpu{result['gpu']} ({result['at']})", "",
             (f"Original power limit {before / 1000:g} W; at the end {after / 1000:g} W. "
              if before is not None else "No GPU power limit could be read. ")
             + f"Tolerance {result['tolerance_w']:g} W.", "",
             "| step | verdict | detail |", "|---|---|---|"]
    for name, s in result["steps"].items():
        lines.append(f"| {name} | {'PASS' if s.get('ok') else 'FAIL'} | {str(s.get('detail', '')).replace('|', '/')} |")
    cal = result["steps"].get("calibrate", {})
    if cal.get("rows"):
        lines += ["", "Calibration (real training on the GPU):", "",
                  "| requested W | enforced W | mean power W | steps/s |", "|---:|---:|---:|---:|"]
        lines += [f"| {r['requested_w']:g} | {r['enforced_w']:g} | {r['mean_power_w']:.1f} | {r['steps_per_s']:.2f} |"
                  for r in cal["rows"]]
    lines += ["", f"verdict: {'PASS' if result['pass'] else 'FAIL'} (wall {result['wall_s']:.0f} s)"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m testbed.power.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("results") / "gpu-check")
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--caps", type=int, default=MIN_CAPS)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--family", default="char-transformer")
    p.add_argument("--substrate", default="netns")
    a = p.parse_args(argv)
    if a.caps < MIN_CAPS:
        print(f"error: --caps: at least {MIN_CAPS}", file=sys.stderr)
        return 2
    res = run_check(a.out, gpu=a.gpu, n_caps=a.caps, seconds=a.seconds, family=a.family, substrate=a.substrate)
    print((a.out / "gpu-check.md").read_text())
    print(f"written: {a.out / 'gpu-check.json'}, {a.out / 'gpu-check.md'}")
    return 0 if res["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
