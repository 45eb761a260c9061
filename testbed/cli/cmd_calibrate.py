"""``testbed calibrate power``: measure a GPU's cap -> (throughput, draw) profile through NVML.
``testbed calibrate compute``: measure training samples/s of the federated study's model here (CPU or CUDA) and
write a compute-profile entry with its provenance (testbed/spec/compute_profile.py).
``testbed calibrate load``: measure checkpoint save/load time against size on this machine (Eq. 1's T_load;
the sim substrate's migration I/O truth, testbed/io_model.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from testbed.recorder.out_dir import results_root

MAX_SECONDS = 86400.0  # per cap: a day
MAX_CAPS = 64


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure a model's parameters on real hardware (power profile, load time)")
    csub = p.add_subparsers(dest="calibrate", metavar="WHAT")
    csub.required = True
    pw = csub.add_parser("power", help="set GPU power caps through NVML, train at each, write a power profile")
    pw.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU (default 0)")
    caps = pw.add_mutually_exclusive_group()
    caps.add_argument("--caps", type=int, default=None, metavar="N",
                      help="N caps evenly spaced over the GPU's range (default 5)")
    caps.add_argument("--cap-w", type=float, nargs="+", default=None, metavar="W", help="these caps, in watts")
    pw.add_argument("--seconds", type=float, default=10.0, help="timed training per cap (default 10)")
    pw.add_argument("--warmup-s", type=float, default=2.0, help="untimed training after each cap change")
    pw.add_argument("--idle-s", type=float, default=2.0, help="idle power measurement before training")
    pw.add_argument("--family", default="char-transformer", help="training workload (default char-transformer)")
    pw.add_argument("--device", default=None, help="torch device to train on (default cuda:GPU)")
    pw.add_argument("--name", default=None, help="profile name (default gpuN-calibrated)")
    pw.add_argument("--out", type=Path, default=None,
                    help="profile YAML to write (default results/calibrate/<name>.yaml)")
    pw.set_defaults(func=_calibrate_power)
    ld = csub.add_parser("load", help="time checkpoint save and load (torch) at several sizes; fit T_load(size)")
    ld.add_argument("--sizes-mb", type=float, nargs="+", default=[64.0, 256.0, 1024.0], metavar="MB",
                    help="checkpoint sizes to time, MiB (default 64 256 1024; at least 2 different)")
    ld.add_argument("--repeats", type=int, default=3, help="timings per size (default 3)")
    ld.add_argument("--device", default="cpu", help="torch device the checkpoint is loaded onto (default cpu)")
    ld.add_argument("--dir", type=Path, default=Path("/var/tmp"),
                    help="directory (on the disk checkpoints land on) for the test files (default /var/tmp)")
    ld.add_argument("--scenario", type=Path, default=None,
                    help="also print T_load for each model family of this scenario's jobs")
    ld.add_argument("--out", type=Path, default=None,
                    help="JSON file to write (default results/calibrate/load.json)")
    ld.set_defaults(func=_calibrate_load)
    cp = csub.add_parser("compute", help="time training samples/s of the federated study's model (and a 1 GB-update-"
                                         "sized MLP) on this machine's CPU or CUDA GPU; write a compute-profile entry")
    cp.add_argument("--entry", default=None,
                    help="profile entry (node type) to write: default cpu-1thread on CPU, else the GPU's name")
    cp.add_argument("--device", default="auto",
                    help="cpu (one thread, CPU time) | cuda | cuda:N | auto (cuda when torch sees a GPU; default)")
    cp.add_argument("--scenario", type=Path, default=None,
                    help="federated scenario whose data set and training (model, hidden, batch size) are timed "
                         "(default scenarios/powertrip-us100.yaml's: digits, mlp 64, batch 16)")
    cp.add_argument("--seconds", type=float, default=3.0, help="timed training per model (default 3)")
    cp.add_argument("--no-update-sized", action="store_true", help="time only the study's model (no 1 GB stand-in)")
    cp.add_argument("--out", type=Path, default=None,
                    help="profile JSON to write or merge into (default results/calibrate/compute-profile.json); "
                         "its other entries are kept")
    cp.set_defaults(func=_calibrate_compute)


def _calibrate_power(args: argparse.Namespace) -> int:
    from testbed.errors import SpecError
    from testbed.power.gpu.calibrate import calibrate, default_caps, render, to_profile
    from testbed.power.errors import PowerLibraryNotFound
    from testbed.power.gpu.nvml import NvmlNode
    from testbed.power.gpu.profile import save_profile

    import math
    import re

    from testbed.errors import OutDirError
    from testbed.recorder.out_dir import check_out_file

    problems = []
    if not (math.isfinite(args.seconds) and 0 < args.seconds <= MAX_SECONDS):
        problems.append(("--seconds", f"must be > 0 and <= {MAX_SECONDS:g}"))
    if not all(math.isfinite(x) and 0 <= x <= MAX_SECONDS for x in (args.warmup_s, args.idle_s)):
        problems.append(("--warmup-s/--idle-s", f"must be >= 0 and <= {MAX_SECONDS:g}"))
    if args.caps is not None and not 2 <= args.caps <= MAX_CAPS:
        problems.append(("--caps", f"at least 2 caps make a profile, at most {MAX_CAPS}"))
    if args.cap_w is not None and not all(math.isfinite(c) and c > 0 for c in args.cap_w):
        problems.append(("--cap-w", "caps must be finite numbers of watts > 0"))
    elif args.cap_w is not None and not 2 <= len(set(args.cap_w)) <= MAX_CAPS:
        problems.append(("--cap-w", f"give at least 2 different caps, at most {MAX_CAPS}"))
    if not 0 <= args.gpu < 1024:
        problems.append(("--gpu", "must be an NVML index >= 0"))
    if args.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", args.name):
        problems.append(("--name", "letters, digits, '_', '.', '-' (at most 64; no path)"))
    name = args.name or f"gpu{args.gpu}-calibrated"
    out = args.out or results_root() / "calibrate" / f"{name}.yaml"
    try:
        check_out_file(out, flag="--out", create_parents=args.out is None)
    except OutDirError as e:
        problems.append(("--out", f"{out}: {e.why}"))
    if problems:
        raise SpecError(problems)
    try:
        node = NvmlNode([args.gpu])
    except PowerLibraryNotFound as e:
        raise PowerLibraryNotFound(f"calibrate power needs an NVIDIA GPU through NVML: {e}") from e
    with node:
        caps_w = sorted(set(args.cap_w)) if args.cap_w else default_caps(node.limits_w(), args.caps or 5)
        print(f"calibrating {node.name}: caps {', '.join(f'{c:g}' for c in caps_w)} W, "
              f"{args.seconds:g} s each ({args.family})")
        cal = calibrate(node, caps_w, family=args.family, seconds=args.seconds, warmup_s=args.warmup_s,
                        idle_s=args.idle_s, device=args.device or f"cuda:{args.gpu}")
    print(render(cal))
    profile, notes = to_profile(cal, name)
    out.parent.mkdir(parents=True, exist_ok=True)
    measured = cal.measured()
    if notes:
        measured["adjusted"] = notes
        for note in notes:
            print(f"note: {note}")
    save_profile(profile, out, measured=measured)
    print(f"written: {out} (limits restored on {node.name})")
    return 0


MAX_SIZE_MB = 65536.0
PAPER_T_LOAD_S = 10.3


def _calibrate_load(args: argparse.Namespace) -> int:
    import json
    import math
    import shutil
    import statistics
    import tempfile

    from testbed.errors import OutDirError, SpecError
    from testbed.recorder.out_dir import check_out_file

    problems = []
    if not all(math.isfinite(x) and 0 < x <= MAX_SIZE_MB for x in args.sizes_mb):
        problems.append(("--sizes-mb", f"sizes must be > 0 and <= {MAX_SIZE_MB:g} MiB"))
    elif len(set(args.sizes_mb)) < 2:
        problems.append(("--sizes-mb", "give at least 2 different sizes (a line needs them)"))
    if not 1 <= args.repeats <= 100 or args.repeats * len(args.sizes_mb) < 3:
        problems.append(("--repeats", "between 1 and 100, and at least 3 timings in all"))
    if not args.dir.is_dir():
        problems.append(("--dir", f"{args.dir}: not a directory"))
    elif not os.access(args.dir, os.W_OK):
        problems.append(("--dir", f"{args.dir}: not writable"))
    elif shutil.disk_usage(args.dir).free < 2.5 * max(args.sizes_mb) * (1 << 20):
        problems.append(("--dir", f"{args.dir}: less free space than 2.5 x the largest size"))
    out = args.out or results_root() / "calibrate" / "load.json"
    try:
        check_out_file(out, flag="--out", create_parents=args.out is None)
    except OutDirError as e:
        problems.append(("--out", f"{out}: {e.why}"))
    families: dict[str, float] = {}
    if args.scenario is not None and not problems:
        from testbed.inputs import build_inputs
        from testbed.spec.load import load_scenario

        jobs = build_inputs(load_scenario(args.scenario).scenario).jobs
        by_family: dict[str, list[float]] = {}
        for j in jobs:
            by_family.setdefault(j.family, []).append(j.checkpoint_gb)
        families = {f: statistics.median(v) for f, v in sorted(by_family.items())}
    if problems:
        raise SpecError(problems)
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise SpecError([("calibrate load", "needs torch (bash scripts/setup.sh installs it)")])
    from testbed.load_calibration import measure

    work = Path(tempfile.mkdtemp(prefix="tb-loadcal-", dir=args.dir))
    try:
        print(f"timing torch checkpoints of {', '.join(f'{s:g}' for s in args.sizes_mb)} MiB x {args.repeats} "
              f"in {args.dir} (loaded onto {args.device})")
        cal = measure(args.sizes_mb, repeats=args.repeats, device=args.device, directory=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cal.command = _command_line(args, out)
    print(f"{'operation':<10} {'fixed s':>9} {'95% CI':>19} {'s per GB':>9} {'95% CI':>19} {'GB/s':>7} {'R2':>6} "
          f"{'rel sd':>7}")
    for op, f in cal.fits.items():
        print(f"{op:<10} {f.fixed_s:9.3f} [{f.fixed_ci95[0]:8.3f},{f.fixed_ci95[1]:8.3f}] {f.s_per_gb:9.3f} "
              f"[{f.s_per_gb_ci95[0]:8.3f},{f.s_per_gb_ci95[1]:8.3f}] {f.gb_per_s:7.2f} {f.r2:6.3f} {f.rel_sd:7.3f}")
    print("rel sd: relative residual s.d. around the fit (the sim's spread of that phase, substrate.io_model)")
    record = cal.to_dict()
    if families:
        record["families"] = {}
        print(f"\nT_load per model family (median checkpoint of the scenario's jobs; the paper: {PAPER_T_LOAD_S} s):")
        for fam, size_gb in families.items():
            t = cal.t_load_s(size_gb)
            record["families"][fam] = {"checkpoint_gb": size_gb, "t_load_s": t, "paper_t_load_s": PAPER_T_LOAD_S}
            print(f"  {fam:<24} {size_gb:8.1f} GB  T_load {t:8.1f} s  (paper {PAPER_T_LOAD_S} s)")
    cold = cal.fits["load_cold"]
    fixed, per_gb = max(0.0, cold.fixed_s), max(0.0, cold.s_per_gb)
    print(f"\nT_load(S) = {fixed:.3f} s + S x {per_gb:.3f} s/GB (cold load) on this machine; for a scenario:\n"
          f"feasibility: {{t_load_s: {fixed:.3f}, t_load_s_per_gb: {per_gb:.4f}}}")
    record["proposed_feasibility"] = {"t_load_s": fixed, "t_load_s_per_gb": per_gb}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"written: {out}\nfor the sim's migration I/O truth, in a scenario: substrate: {{io_model: {out}}}")
    return 0


def _command_line(args: argparse.Namespace, out: Path) -> str:
    """The command that reproduces this calibration (every option spelled out)."""
    import shlex

    parts = ["testbed", "calibrate", "load", "--sizes-mb", *(f"{s:g}" for s in args.sizes_mb),
             "--repeats", str(args.repeats), "--device", args.device, "--dir", str(args.dir)]
    if args.scenario is not None:
        parts += ["--scenario", str(args.scenario)]
    return shlex.join([*parts, "--out", str(out)])


MAX_COMPUTE_SECONDS = 600.0


def _calibrate_compute(args: argparse.Namespace) -> int:
    import json
    import math
    import re

    from testbed.errors import OutDirError, SpecError
    from testbed.recorder.out_dir import check_out_file

    problems = []
    if not (math.isfinite(args.seconds) and 0 < args.seconds <= MAX_COMPUTE_SECONDS):
        problems.append(("--seconds", f"must be > 0 and <= {MAX_COMPUTE_SECONDS:g}"))
    if args.entry is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", args.entry):
        problems.append(("--entry", "letters, digits, '_', '.', '-' (at most 64; no path)"))
    if not re.fullmatch(r"auto|cpu|cuda(:[0-9]{1,3})?", args.device):
        problems.append(("--device", "cpu, cuda, cuda:N or auto"))
    out = args.out or results_root() / "calibrate" / "compute-profile.json"
    try:
        check_out_file(out, flag="--out", create_parents=args.out is None)
    except OutDirError as e:
        problems.append(("--out", f"{out}: {e.why}"))
    existing = None
    if out.exists() and not problems:
        from testbed.spec.compute_profile import ComputeProfileError, load_profile

        try:
            existing = load_profile(out)  # merge: a file that is not a profile is refused, never overwritten
        except ComputeProfileError as e:
            problems += [("--out", f"{w}: {m}") for w, m in e.problems]
    scenario = args.scenario or Path(__file__).resolve().parents[2] / "scenarios" / "powertrip-us100.yaml"
    fl = None
    if not problems:
        from testbed.spec.load import load_scenario

        sc = load_scenario(scenario).scenario
        if sc.federated is None:
            problems.append(("--scenario", f"{scenario}: not a federated scenario (no federated: block)"))
        fl = sc.federated
    if problems:
        raise SpecError(problems)
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise SpecError([("calibrate compute", "needs torch (bash scripts/setup.sh installs it)")])
    from testbed.federated.compute_measure import measure_entry

    entry_name, entry = measure_entry(fl, device=args.device, seconds=args.seconds, entry=args.entry,
                                      update_sized=not args.no_update_sized,
                                      command=_compute_command(args, scenario, out))
    data = {"format": "testbed-compute-profile/1", "description": "written by testbed calibrate compute",
            "entries": {}}
    if existing is not None:
        data = json.loads(out.read_text())
    data["entries"][entry_name] = entry
    from testbed.spec.compute_profile import profile_from_bytes

    raw = (json.dumps(data, indent=2) + "\n").encode()
    profile_from_bytes(raw, where=str(out), source=str(out))  # what is written loads
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(raw)
    for key in ("study_samples_per_s", "gb_samples_per_s"):
        if key in entry:
            print(f"{entry_name}: {key} = {entry[key]:.4g}")
    print(f"written: {out} (entry {entry_name}, {'merged' if existing is not None else 'new file'})\n"
          f"in a scenario: federated: {{compute: {{samples_per_s: profile, profile: {out}, node_type: {entry_name}}}}}")
    return 0


def _compute_command(args: argparse.Namespace, scenario: Path, out: Path) -> str:
    import shlex

    parts = ["testbed", "calibrate", "compute", "--device", args.device, "--seconds", f"{args.seconds:g}",
             "--scenario", str(scenario)]
    if args.entry:
        parts += ["--entry", args.entry]
    if args.no_update_sized:
        parts.append("--no-update-sized")
    return shlex.join([*parts, "--out", str(out)])
