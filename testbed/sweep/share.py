"""A CPU share for each emulation trial that runs beside others on this machine (``--parallel N``).

Two emulated runs keep apart by themselves: every namespace, interface, cgroup and temp folder is
named by the run's id, and every address, route, port, sysctl and qdisc lies inside the run's own
network namespaces (the netns fabric makes nothing in the root namespace), so two trials may both
use 10.200.0.1. What they share is the CPUs. A trial run in parallel therefore:

- gets a cgroup ``tb-<run>-trial`` of its own (in the hierarchy with the ``cpu`` controller: v1 where
  mounted, else v2) with the default weight (v1 ``cpu.shares`` 1024, v2 ``cpu.weight`` 100), so that
  trials get equal CPU under contention however many processes each starts (relays, agents,
  transfer servers all start inside it). It is listed in the run's state file *before* it is made
  (``testbed clean`` removes it after a crash: tasks moved to the parent first) and removed when
  the trial ends;
- with cgroup v1's real-time group scheduling (``cpu.rt_runtime_us``), gets 1/N of its parent's
  real-time runtime: a new group has none, and without it the compiled delay relays could not take
  their SCHED_FIFO priority (``TESTBED_RELAY_RT_PRIO``) and would run at normal priority;
- sizes its relay pool to its share of the CPUs (``TESTBED_RELAY_PROCS`` = CPUs / N, unless set):
  by default a fabric starts one relay process per CPU, as if it had the machine to itself;
- does not record its pace (:mod:`testbed.studies.pace`): a step measured beside other trials would
  make the next single run's estimate too long.

Where no cgroup can be made (no root, no cpu controller, a cgroup v2 parent that holds processes and
so cannot delegate the controller) the trial runs without one and its ``trial.json`` says why.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from testbed.lifecycle import critical
from testbed.netem.owned import state

TAG = "trial"
V1_SHARES = 1024  # the kernel's default weights: every trial the same
V2_WEIGHT = 100
PROCS = "cgroup.procs"  # v1 and v2: writing a PID moves the whole process


def _cgroups():
    """The cgroup helpers (:mod:`testbed.power.throttle.cgroups`), imported when a share is made."""
    from testbed.power.throttle import cgroups

    return cgroups


@dataclass
class TrialShare:
    """What a trial running beside ``parallel - 1`` others got (``trial.json``'s ``cpu_share``)."""

    run_id: str
    parallel: int
    cgroup: str | None = None          # the cgroup's path; None: none could be made (``why``)
    version: int | None = None         # 1 or 2
    weight: int | None = None          # cpu.shares (v1) or cpu.weight (v2)
    rt_runtime_us: int | None = None   # v1 with real-time group scheduling: the group's real-time runtime
    relay_procs: int | None = None     # the relay processes a fabric of this trial starts at most
    why: str | None = None             # why there is no cgroup, or no real-time runtime

    def describe(self) -> dict:
        return asdict(self)


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _hierarchy(mounts: dict[str, Path]) -> tuple[int, Path] | None:
    if "v1_cpu" in mounts:
        return 1, mounts["v1_cpu"]
    if "v2" in mounts:
        return 2, mounts["v2"]
    return None


def _make(share: TrialShare, version: int, parent: Path, name: str) -> Path:
    """Create the cgroup under ``parent`` and set its weight (and real-time runtime); its path."""
    path = parent / name
    if version == 2:
        control = parent / "cgroup.subtree_control"
        if "cpu" not in control.read_text().split():
            _write(control, "+cpu")  # EBUSY where the parent holds processes (v2's no-internal-tasks rule)
    path.mkdir()
    if version == 1:
        _write(path / "cpu.shares", str(V1_SHARES))
        share.weight = V1_SHARES
        parent_rt = _read_int(parent / "cpu.rt_runtime_us")
        if parent_rt is not None:  # the kernel has real-time group scheduling
            want = max(0, parent_rt) // share.parallel
            try:
                _write(path / "cpu.rt_runtime_us", str(want))
                share.rt_runtime_us = want
            except OSError as e:  # the parent's real-time runtime is promised to other groups
                share.rt_runtime_us = _read_int(path / "cpu.rt_runtime_us")
                share.why = (f"real-time runtime {want} us not granted ({e.strerror}): the delay relays run at "
                             "normal priority")
    else:
        _write(path / "cpu.weight", str(V2_WEIGHT))
        share.weight = V2_WEIGHT
    return path


@contextlib.contextmanager
def trial_share(run_id: str, parallel: int, *, mounts: dict[str, Path] | None = None,
                cpus: int | None = None, env: dict | None = None, pid: int | None = None) -> Iterator[TrialShare]:
    """For the block, this process (and what it starts) in its own cgroup ``tb-<run>-trial`` with an
    equal CPU share, listed in run ``run_id``'s state file first; see the module doc. Never raises for
    a share it cannot have: the trial runs without one and the returned :class:`TrialShare` says why."""
    from testbed.netem.relay.relaypool import RELAY_PROCS_ENV
    from testbed.studies.pace import NO_RECORD_ENV

    env = os.environ if env is None else env
    pid = os.getpid() if pid is None else pid
    share = TrialShare(run_id=run_id, parallel=parallel)
    cpus = cpus or len(os.sched_getaffinity(0))
    saved = {k: env.get(k) for k in (RELAY_PROCS_ENV, NO_RECORD_ENV)}
    if not (env.get(RELAY_PROCS_ENV) or "").strip():
        env[RELAY_PROCS_ENV] = str(max(1, cpus // max(parallel, 1)))
    raw = env[RELAY_PROCS_ENV].strip()
    share.relay_procs = int(raw) if raw.isdigit() else None
    env[NO_RECORD_ENV] = "1"
    cg = _cgroups()
    name = cg.cgroup_name(run_id, TAG)
    found = _hierarchy(cg.cgroup_mounts() if mounts is None else mounts)
    path = parent = None
    if os.geteuid() != 0 and mounts is None:
        share.why = "not root: no cgroup"
    elif found is None:
        share.why = "no cgroup hierarchy with the cpu controller is mounted"
    else:
        version, mount = found
        parent = cg.own_cgroup(mount, version)
        with critical():  # listed, then made: `testbed clean` finds it if this process dies
            state.add(run_id, cgroups=[name])
            try:
                path = _make(share, version, parent, name)
                _write(path / PROCS, str(pid))
                share.cgroup, share.version = str(path), version
            except OSError as e:
                share.why = f"cgroup-v{version}: cannot make {parent / name}: {e.strerror or e}"
                share.weight = share.rt_runtime_us = None
                _remove(cg, path, parent, pid, run_id, name)
                path = None
    try:
        yield share
    finally:
        with critical():
            if path is not None:
                _remove(cg, path, parent, pid, run_id, name)
            for k, v in saved.items():
                if v is None:
                    env.pop(k, None)
                else:
                    env[k] = v


def _remove(cg, path: Path | None, parent: Path | None, pid: int, run_id: str, name: str) -> None:
    """This process back to the parent, the cgroup removed (what is left in it moved to the parent too),
    then forgotten by the state file; a cgroup that cannot be removed stays listed for ``testbed clean``."""
    if path is not None and path.is_dir():
        try:
            if parent is not None:
                _write(parent / PROCS, str(pid))
            cg.release_cgroup(path, PROCS)
        except (OSError, cg.ThrottleError):
            return
    state.discard(run_id, cgroups=[name])
