"""Find and remove what our runs left behind — and nothing else.

A run's resources are recognised by its run id: namespaces ``tb-<run>-...``, interfaces
``tb<run>...`` (only in the root namespace after a crash mid-build), CPU-throttle cgroups
``tb-<run>-...`` (their tasks are moved to the parent first), processes whose PIDs the
run recorded in its state file *and* whose command line still names the run. A run whose owner
process is alive is skipped unless ``force`` (it may be in use by another testbed command).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

from testbed.netem import state
from testbed.netem.naming import if_prefix, ns_prefix, run_of_ns


@dataclass
class CleanReport:
    run_id: str
    skipped: str | None = None
    namespaces: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)


def runs_present() -> list[str]:
    from pyroute2 import netns

    from testbed.power.cgroups import find_run_cgroups, run_of_cgroup

    ids = {r for r in (run_of_ns(n) for n in netns.listnetns()) if r}
    ids |= {r for r in (run_of_cgroup(p) for _, p in find_run_cgroups()) if r}
    return sorted(ids | set(state.all_runs()))


def _stop_pid(pid: int, run_id: str) -> bool:
    """End a process we started: only if it is alive and its command line names this run."""
    if not state.pid_alive(pid) or run_id not in state.pid_cmdline(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(30):
        if not state.pid_alive(pid):
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return True


def clean_run(run_id: str, *, force: bool = False) -> CleanReport:
    from pyroute2 import IPRoute, netns

    rep = CleanReport(run_id)
    st = state.read(run_id)
    if st and not force and st.get("purpose") != "net" and st.get("owner_pid") != os.getpid() \
            and state.pid_alive(int(st.get("owner_pid", 0))):
        rep.skipped = f"owner process {st['owner_pid']} is alive (use --force to remove anyway)"
        return rep
    for pid in (st or {}).get("pids", []):
        if _stop_pid(int(pid), run_id):
            rep.pids.append(int(pid))
    prefix = ns_prefix(run_id)
    for ns in netns.listnetns():
        if ns.startswith(prefix):
            netns.remove(ns)
            rep.namespaces.append(ns)
    ifp = if_prefix(run_id)
    with IPRoute() as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if name and name.startswith(ifp):
                ipr.link("del", index=link["index"])
                rep.interfaces.append(name)
    from testbed.power.cgroups import remove_run_cgroups

    rep.cgroups = remove_run_cgroups(run_id)  # after the processes: their tasks have exited
    tmp = (st or {}).get("tmp_dir")
    if tmp and os.path.basename(tmp).startswith(f"tb-{run_id}-") and os.path.isdir(tmp):
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    state.remove(run_id)
    return rep


def clean(run_id: str | None = None, *, force: bool = False) -> list[CleanReport]:
    targets = [run_id] if run_id else runs_present()
    return [clean_run(r, force=force) for r in targets]
