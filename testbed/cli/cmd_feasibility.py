"""``testbed feasibility``: assess one migration with Eq. 1 / Eq. 2, and/or draw the phase diagram.

Numbers are read as strings and converted here, so that every bad value becomes one
``--flag: message`` line (exit 2) through :class:`~testbed.errors.SpecError`.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from testbed.errors import SpecError
from testbed.feasibility import (MIN_EPSILON, TCP_EFFICIENCY_MTU1500, Corrections, FeasibilityInputError,
                                 FeasibilityParams, Prediction, assess)

# (flag, default, check, message) for every numeric flag; ``None`` default: not given.
_NUMBERS = (
    ("--checkpoint-gb", None, lambda x: x > 0, "must be > 0"),
    ("--bandwidth-gbps", None, lambda x: x > 0, "must be > 0"),
    ("--window-h", "2.5", lambda x: x > 0, "must be > 0"),
    ("--alpha", "0.1", lambda x: 0 < x <= 1, "must be in (0, 1]"),
    ("--t-load-s", "10.3", lambda x: x >= 0, "must be >= 0"),
    ("--t-load-s-per-gb", "0", lambda x: x >= 0, "must be >= 0"),
    ("--t-downtime-s", "0.4", lambda x: x >= 0, "must be >= 0"),
    ("--p-sys-kw", "1.8", lambda x: x > 0, "must be > 0"),
    ("--p-node-kw", "0.75", lambda x: x > 0, "must be > 0"),
    ("--robust-degradation-pct", "50", lambda x: 0 <= x < 100, "must be in [0, 100)"),
    ("--epsilon", None, lambda x: MIN_EPSILON <= x <= 0.5, f"must be in [{MIN_EPSILON:g}, 0.5]"),
    ("--window-noise-pct", None, lambda x: x >= 0, "must be >= 0"),
    ("--window-bias-pct", None, lambda x: x > -100, "must be > -100"),
    ("--protocol-efficiency", None, lambda x: 0 < x <= 1, "must be in (0, 1]"),
    ("--rtt-ms", None, lambda x: x >= 0, "must be >= 0"),
)
# Older spellings still accepted (the checkpoint size was --size-gb before it got the name every
# table uses, checkpoint_gb).
_ALIASES = {"--checkpoint-gb": ("--size-gb",)}
_FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
# The model's names of inputs and derived quantities -> the flags that set them (a derived quantity
# that overflows is blamed on the flags it is computed from).
_FLAGS_OF = {
    "size_gb": "--checkpoint-gb", "checkpoint_gb": "--checkpoint-gb", "size_bytes": "--checkpoint-gb",
    "bandwidth_gbps": "--bandwidth-gbps",
    "transfer_s": "--checkpoint-gb/--bandwidth-gbps", "time_s": "--checkpoint-gb/--bandwidth-gbps",
    "window_s": "--window-h", "window_forecast_s": "--window-h", "alpha": "--alpha", "needed_s": "--alpha",
    "t_load_s": "--t-load-s", "t_load_s_per_gb": "--t-load-s-per-gb", "t_downtime_s": "--t-downtime-s", "p_sys_kw": "--p-sys-kw",
    "e_cost_kwh": "--p-sys-kw/--checkpoint-gb/--bandwidth-gbps", "p_node_kw": "--p-node-kw",
    "breakeven_min": "--p-node-kw/--p-sys-kw", "robust_degradation_frac": "--robust-degradation-pct",
    "epsilon": "--epsilon", "noise_frac": "--window-noise-pct", "bias_frac": "--window-bias-pct",
    "risk_window_s": "--window-noise-pct/--window-bias-pct", "protocol_efficiency": "--protocol-efficiency",
    "rtt_ms": "--rtt-ms",
}
_HELP = {
    "--checkpoint-gb": "checkpoint size S in GB (1e9 bytes)",
    "--bandwidth-gbps": "WAN bandwidth B in Gbit/s",
    "--window-h": "remaining renewable window T_energy in hours (default 2.5; the forecast with --epsilon)",
    "--alpha": "acceptable overhead fraction of the window (default 0.1)",
    "--t-load-s": "checkpoint load time at the destination, s (default 10.3); the fixed part with --t-load-s-per-gb",
    "--t-load-s-per-gb": "load time per GB of checkpoint, s/GB (default 0: the paper's constant; "
                         "`testbed calibrate load` measures it)",
    "--t-downtime-s": "switch-over downtime, s (default 0.4)",
    "--p-sys-kw": "system power during the transfer, kW (default 1.8)",
    "--p-node-kw": "compute power at the destination, kW (default 0.75)",
    "--robust-degradation-pct": "class A must survive this bandwidth loss, %% (default 50)",
    "--epsilon": "risk budget: feasible iff P(true window long enough) >= 1 - epsilon",
    "--window-noise-pct": "forecast error sigma, %% (log-normal model; needs --epsilon)",
    "--window-bias-pct": "forecast bias, %% (forecast longer than truth when > 0; needs --epsilon)",
    "--protocol-efficiency": "goodput / configured rate (e.g. 0.956)",
    "--rtt-ms": "RTT in ms: adds a TCP handshake and slow-start ramp to the transfer",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "feasibility",
        help="assess one migration (Eq. 1 / Eq. 2) and/or draw the feasibility phase diagram",
        description="Assess one checkpoint migration with Eq. 1 / Eq. 2 of arXiv 2511.16182 "
        "(classes from Eq. 1 jointly with window and bandwidth), and/or draw the phase diagram.",
        allow_abbrev=False,
    )
    for flag, default, _check, _message in _NUMBERS:
        p.add_argument(flag, *_ALIASES.get(flag, ()), default=default, help=_HELP[flag])
    p.add_argument("--tcp-efficiency", action="store_true", help=f"protocol efficiency 1448/1514 = {TCP_EFFICIENCY_MTU1500:.4f}")
    p.add_argument("--phase-diagram", metavar="PNG", help="draw the phase diagram into this file")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of aligned lines")
    p.set_defaults(func=run)


def _numbers(args: argparse.Namespace) -> dict[str, float | None]:
    """Every numeric flag as a float (or None when absent); all problems reported at once."""
    values, problems = {}, []
    for flag, _default, check, message in _NUMBERS:
        raw = getattr(args, flag[2:].replace("-", "_"))
        value = None
        if raw is not None:
            try:
                value = float(raw)
            except ValueError:
                problems.append((flag, f"not a number: {raw!r}"))
                continue
            if not math.isfinite(value):
                problems.append((flag, "must be a finite number"))
            elif not check(value):
                problems.append((flag, message))
        values[flag] = value
    if problems:
        raise SpecError(problems)
    return values


def _cross_checks(args: argparse.Namespace, v: dict[str, float | None]) -> None:
    problems = []
    if args.phase_diagram is None:
        for flag in ("--checkpoint-gb", "--bandwidth-gbps"):
            if v[flag] is None:
                problems.append((flag, "required (unless only --phase-diagram is asked for)"))
    elif (v["--checkpoint-gb"] is None) != (v["--bandwidth-gbps"] is None):
        flag = "--checkpoint-gb" if v["--checkpoint-gb"] is None else "--bandwidth-gbps"
        problems.append((flag, "required together with " + ("--bandwidth-gbps" if flag == "--checkpoint-gb" else "--checkpoint-gb")))
    if args.tcp_efficiency and v["--protocol-efficiency"] is not None:
        problems.append(("--tcp-efficiency", "cannot be combined with --protocol-efficiency"))
    for flag in ("--window-noise-pct", "--window-bias-pct"):
        if v[flag] is not None and v["--epsilon"] is None:
            problems.append((flag, "needs --epsilon"))
    if args.phase_diagram is not None:
        from testbed.errors import OutDirError
        from testbed.recorder.out_dir import check_out_file

        if Path(args.phase_diagram).suffix.lower() not in _FIGURE_SUFFIXES:
            problems.append(("--phase-diagram", f"file name must end in one of {', '.join(_FIGURE_SUFFIXES)}"))
        else:
            try:
                check_out_file(args.phase_diagram, flag="--phase-diagram")
            except OutDirError as e:
                problems.append(("--phase-diagram", f"{args.phase_diagram}: {e.why}"))
    if problems:
        raise SpecError(problems)


def _params(args: argparse.Namespace, v: dict[str, float | None]) -> FeasibilityParams:
    efficiency = TCP_EFFICIENCY_MTU1500 if args.tcp_efficiency else v["--protocol-efficiency"]
    return FeasibilityParams(
        alpha=v["--alpha"],
        t_load_s=v["--t-load-s"],
        t_load_s_per_gb=v["--t-load-s-per-gb"],
        t_downtime_s=v["--t-downtime-s"],
        p_sys_kw=v["--p-sys-kw"],
        p_node_kw=v["--p-node-kw"],
        robust_degradation_frac=v["--robust-degradation-pct"] / 100.0,
        corrections=Corrections(protocol_efficiency=efficiency, rtt_ms=v["--rtt-ms"]),
    )


def _report(a: Prediction) -> dict:
    """The printed keys, in order (units in the names)."""
    out = {
        "checkpoint_gb": a.size_gb,
        "bandwidth_gbps": a.bandwidth_gbps,
        "window_s": a.window_s,
        "alpha": a.alpha,
        "transfer_s": a.transfer_s,
        "load_s": a.load_s,
        "downtime_s": a.downtime_s,
        "total_s": a.total_s,
        "budget_s": a.budget_s,
        "margin_s": a.margin_s,
        "feasible": a.feasible,
        "class": a.feasibility_class,
        "paper_class": a.paper_class,
        "e_cost_kwh": a.e_cost_kwh,
        "breakeven_min": a.breakeven_min,
    }
    if a.epsilon is not None:
        out.update(epsilon=a.epsilon, risk_window_s=a.risk_window_s, p_window_ok=a.p_window_ok)
    out["corrections"] = a.corrections
    return out


def _format(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return ", ".join(value) or "none"
    return str(value)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except FeasibilityInputError as e:  # out of range once combined (e.g. 8 S / B overflows)
        raise SpecError([(_FLAGS_OF.get(e.name, e.name), f"{e.message} ({e.name})")]) from None


def _run(args: argparse.Namespace) -> int:
    v = _numbers(args)
    _cross_checks(args, v)
    params = _params(args, v)
    window_s = v["--window-h"] * 3600.0
    if not math.isfinite(window_s):
        raise SpecError([("--window-h", "too large (the window in seconds is not a finite number)")])
    out: dict = {}
    if v["--checkpoint-gb"] is not None:
        a = assess(
            v["--checkpoint-gb"],
            v["--bandwidth-gbps"],
            window_s,
            params,
            epsilon=v["--epsilon"],
            window_noise_frac=(v["--window-noise-pct"] or 0.0) / 100.0,
            window_bias_frac=(v["--window-bias-pct"] or 0.0) / 100.0,
        )
        out.update(_report(a))
    if args.phase_diagram is not None:
        from testbed.analysis.phase_diagram import plot_phase_diagram  # matplotlib only when asked for

        out["phase_diagram"] = str(plot_phase_diagram(args.phase_diagram, window_s, params))
    if args.json:
        print(json.dumps(out))
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            print(f"{key:<{width}}  {_format(value)}")
    return 0
