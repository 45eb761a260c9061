"""``testbed calibrate power``: measure a GPU's cap -> (throughput, draw) profile through NVML."""

from __future__ import annotations

import argparse
from pathlib import Path

MAX_SECONDS = 86400.0  # per cap: a day
MAX_CAPS = 64


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure a model's parameters on real hardware (power profile)")
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


def _calibrate_power(args: argparse.Namespace) -> int:
    from testbed.errors import SpecError
    from testbed.power.calibrate import calibrate, default_caps, render, to_profile
    from testbed.power.errors import PowerLibraryNotFound
    from testbed.power.nvml import NvmlNode
    from testbed.power.profile import save_profile

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
    out = args.out or Path("results") / "calibrate" / f"{name}.yaml"
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
