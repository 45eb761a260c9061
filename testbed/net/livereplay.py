"""Replay a scenario's bandwidth traces (variance and degradation events) on a held network.

The same machinery as an emulated run (:mod:`testbed.substrate.emulated.replay`): the change points
of the scenario's true bandwidth traces, at the run's scaling (``emulation.time_scale`` and
``byte_scale``), applied by a :class:`LinkReplayer` on an :class:`EmulationClock` that never skips
(nothing tells it when the network is idle). Each change goes through :class:`LiveNet`, so it is
made in place and ``testbed net status`` shows it.

``testbed net up SCENARIO --replay`` leaves the network up, so the replay runs in a process of its
own, ``python -m testbed.net.livereplay --run RUN --changes FILE`` (recorded in the run's state
file; ``net down`` / ``clean`` end it by PID); a Python handle runs it in a thread.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from testbed.netem.owned import state
from testbed.netem.live import LiveNet, locked
from testbed.substrate.emulated.clock import EmulationClock
from testbed.substrate.emulated.replay import LinkReplayer, RateChange, change_points


def scenario_changes(inputs, scaling) -> list[RateChange]:
    """Every wall-clock rate change of the scenario's bandwidth traces within its duration."""
    return change_points(inputs.bandwidth_gbps, scaling.rate_mbit, inputs.scenario.duration_s)


def replay_info(changes: list[RateChange], time_scale: float, duration_s: float) -> dict:
    """What the state file says about a replay that starts now (scenario t = 0 is ``t0_unix``)."""
    return {"time_scale": time_scale, "duration_s": duration_s, "changes": len(changes), "applied": 0,
            "t0_unix": time.time(), "t0_monotonic": time.monotonic(),
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "last": None, "done": False}


def make_hook(run_id: str, live: LiveNet | None = None):
    """``(src, dst, rate_mbit) -> seconds``: the change in place, then the replay's progress in the state."""
    live = live or LiveNet(run_id)

    def apply(src: str, dst: str, rate_mbit: float) -> float:
        took = live.set_rate(src, dst, rate_mbit)
        with locked():
            st = state.read(run_id)
            if st is not None and isinstance(st.get("replay"), dict):
                rp = st["replay"]
                rp["applied"] = int(rp.get("applied", 0)) + 1
                t_s = (time.monotonic() - float(rp["t0_monotonic"])) * float(rp["time_scale"])
                rp["last"] = {"src": src, "dst": dst, "rate_mbit": rate_mbit, "t_s": round(t_s, 3)}
                state.write(run_id, st)
        return took

    return apply


def mark_done(run_id: str) -> None:
    with locked():
        st = state.read(run_id)
        if st is not None and isinstance(st.get("replay"), dict):
            st["replay"]["done"] = True
            state.write(run_id, st)


def replayer(run_id: str, changes: list[RateChange], time_scale: float, t0_monotonic: float) -> LinkReplayer:
    """A replayer whose scenario time 0 is ``t0_monotonic`` (not started)."""
    live = LiveNet(run_id)
    live.warm()
    clock = EmulationClock(time_scale, skip_idle=False)
    clock.start((time.monotonic() - t0_monotonic) * time_scale)

    def finished() -> None:  # in the replayer's thread, when it ends: done if every change is behind it
        if rp.error is None and (not changes or clock.now_s() >= changes[-1].t_s):
            mark_done(run_id)

    rp = LinkReplayer(changes, clock, make_hook(run_id, live), on_exit=finished)
    return rp


def write_changes(path: Path, changes: list[RateChange], time_scale: float, t0_monotonic: float) -> None:
    path.write_text(json.dumps({"time_scale": time_scale, "t0_monotonic": t0_monotonic,
                                "changes": [[c.t_s, c.src, c.dst, c.rate_mbit] for c in changes]}))


def start_daemon(run_id: str, tmp_dir: str, changes: list[RateChange], time_scale: float,
                 t0_monotonic: float) -> int:
    """Start the replay process (own session, outlives the caller); records its PID; returns it."""
    tmp = Path(tmp_dir)
    plan = tmp / "replay.json"
    write_changes(plan, changes, time_scale, t0_monotonic)
    log = open(tmp / "replay.log", "ab")  # noqa: SIM115 (handed to the child)
    try:
        from testbed.lifecycle import critical

        with critical():  # started and recorded as one step
            proc = subprocess.Popen([sys.executable, "-m", "testbed.net.livereplay", "--run", run_id,
                                     "--changes", str(plan)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True, close_fds=True)
            state.add(run_id, purpose="net", pids=[proc.pid])
            with locked():
                st = state.load(run_id)
                if isinstance(st.get("replay"), dict):
                    st["replay"]["pid"] = proc.pid
                    state.write(run_id, st)
    finally:
        log.close()
    proc.returncode = 0  # not ours to reap: it outlives this process (no ResourceWarning on exit)
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbed.net.livereplay", description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--changes", required=True, type=Path)
    a = p.parse_args(argv)
    data = json.loads(a.changes.read_text())
    changes = [RateChange(float(t), str(s), str(d), float(r)) for t, s, d, r in data["changes"]]
    rp = replayer(a.run, changes, float(data["time_scale"]), float(data["t0_monotonic"]))
    halt = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: halt.set())
    rp.start()
    while rp.is_alive() and not halt.is_set():
        rp.join(timeout=0.2)
    rp.stop()
    for c in rp.applied:
        print(json.dumps({k: v for k, v in c.items() if k != "wall"}), flush=True)
    if rp.error is not None:
        print(f"replay failed: {rp.error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    os.umask(0o077)
    sys.exit(main())
