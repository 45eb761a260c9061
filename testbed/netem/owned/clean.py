"""Remove what our runs left behind — and nothing else.

Only what a valid state file lists is touched (:mod:`testbed.netem.owned.state`: the testbed marker,
the run id matching the file name), and each listed name must also carry the run's prefix:

- processes: a listed PID still running (a zombie counts as gone) whose command line names the run,
  and processes working in the run's listed folders (an argument in its temp folder or engine
  directory: relays forked before their PIDs could be written, a private engine's daemons); ended
  together (SIGTERM, then SIGKILL for what is left);
- namespaces ``tb-<run>-...``; interfaces ``tb<run>...`` in the root namespace;
- cgroups named ``tb-<run>`` or ``tb-<run>-...`` (tasks moved to the parent first; the tasks of a
  private engine's ``tb-<run>`` cgroup, its containers' processes, are ended);
- temp folders: real directories (not links) directly under the system temp dir named ``tb-<run>-...``;
- partial results: real directories named ``.NAME.partial-PID`` (the results writer's working name);
- the userspace Open vSwitch device (``ovs-netdev``) a run's private Open vSwitch made, once no
  ``ovs-vswitchd`` runs on the host any more (the state file says the run made it; it is not named
  after the run);
- a private Docker engine's run directory ``<TESTBED_DOCKER_DIR>/docker-<run>`` (mounts under it
  detached first), after its daemon was ended.

A look-alike that no state file lists (a ``tb-abc123-x`` namespace someone else made) is left alone;
a file in the state directory that is not a valid state file is reported, never acted on. A run
whose owner process is alive is skipped unless ``force`` (it may be in use: a run, a ``doctor``).
Every step is guarded: a failure is reported for that resource and the rest still runs; the state
file stays (so a later ``clean`` retries) until everything it lists is gone.
"""

from __future__ import annotations

import contextlib

import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from testbed.netem.owned import state
from testbed.netem.owned.naming import if_prefix, ns_prefix

PARTIAL_NAME_RE = re.compile(r"^\..+\.(partial|old)-[0-9]+$")
STOP_TIMEOUT_S = 3.0


@dataclass
class CleanReport:
    run_id: str
    skipped: str | None = None
    namespaces: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # temp folders, partial results, the state file
    refused: list[str] = field(default_factory=list)  # listed but not ours by name or kind: left alone
    errors: list[str] = field(default_factory=list)  # could not be removed (the state file stays)

    @property
    def ok(self) -> bool:
        return self.skipped is None and not self.errors


def runs_present() -> list[str]:
    """Runs with a valid state file (the only runs ``clean`` knows)."""
    return state.all_runs()


def _stop_pids(pids: list[int], run_id: str, rep: CleanReport) -> None:
    """End the listed processes that still run and whose command line names this run, all at once."""
    from testbed.processes import owned_processes

    _end(owned_processes(pids, run_id, rep.errors), rep)


def _end(procs: list, rep: CleanReport) -> None:
    """SIGTERM all, wait for all together, SIGKILL what is left (one mechanism for the whole
    package: :func:`testbed.processes.stop_processes`; zombies count as ended)."""
    from testbed.processes import stop_processes

    stopped = stop_processes(procs, timeout_s=STOP_TIMEOUT_S, kill_wait_s=STOP_TIMEOUT_S)
    survivors = set(stopped.survivors)
    rep.pids += stopped.already_gone + stopped.terminated + [pid for pid in stopped.killed if pid not in survivors]
    rep.errors += [f"process {pid}: still running after SIGKILL" for pid in stopped.survivors]


def _names(arg: str, path: str) -> bool:
    return arg == path or arg.startswith(path + "/") or f"={path}/" in arg or arg.endswith(f"={path}")


def _processes_naming(paths: list[str]) -> list:
    """Running processes with an argument that is, or lies under, one of ``paths`` (directories the
    run recorded before making them: a process working in them is the run's, recorded PID or not)."""
    import psutil

    found = []
    if not paths:
        return found
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.pid != os.getpid() \
                    and any(_names(a, d) for a in (p.info["cmdline"] or []) for d in paths):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _remove_namespaces(names: list[str], run_id: str, rep: CleanReport) -> None:
    from testbed.netem.nsmake import remove_netns

    prefix = ns_prefix(run_id)
    for ns in names:
        if not ns.startswith(prefix) or "/" in ns:
            rep.refused.append(f"namespace {ns!r}: not named {prefix}*")
            continue
        try:
            if remove_netns(ns):
                rep.namespaces.append(ns)
        except OSError as e:
            rep.errors.append(f"namespace {ns}: {e}")


def _remove_interfaces(names: list[str], run_id: str, rep: CleanReport) -> None:
    prefix = if_prefix(run_id)
    wanted = []
    for name in names:
        if name.startswith(prefix):
            wanted.append(name)
        else:
            rep.refused.append(f"interface {name!r}: not named {prefix}*")
    if not wanted:
        return
    try:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            for name in wanted:
                try:
                    found = ipr.link_lookup(ifname=name)
                    if found:
                        ipr.link("del", index=found[0])
                        rep.interfaces.append(name)
                except Exception as e:  # noqa: BLE001 (NetlinkError and friends: reported per interface)
                    if "No such device" not in str(e):  # gone with its peer meanwhile
                        rep.errors.append(f"interface {name}: {e}")
    except Exception as e:  # noqa: BLE001
        rep.errors.append(f"interfaces: {e}")


OVS_NETDEV_IF = "ovs-netdev"


def _remove_ovs_netdev(name: str | None, rep: CleanReport) -> None:
    """The device a run's private Open vSwitch made (its state says so), when no ovs-vswitchd is left
    that could be using it (another one may have adopted it: then it stays)."""
    if name != OVS_NETDEV_IF:
        return
    import psutil
    from pyroute2 import IPRoute

    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] == "ovs-vswitchd":
            rep.refused.append(f"{name}: left in place, an ovs-vswitchd (PID {proc.pid}) is running")
            return
    with IPRoute() as ipr:
        for index in ipr.link_lookup(ifname=name):
            ipr.link("del", index=index)
            rep.interfaces.append(name)


def _remove_cgroups(names: list[str], run_id: str, rep: CleanReport) -> None:
    from testbed.power.throttle.cgroups import find_cgroups_named, release_named

    mine = []
    for name in names:
        if (name == f"tb-{run_id}" or name.startswith(f"tb-{run_id}-")) and "/" not in name:
            mine.append(name)
        else:
            rep.refused.append(f"cgroup {name!r}: not named tb-{run_id}[-*]")
    try:
        found = find_cgroups_named(mine)
    except OSError as e:
        rep.errors.append(f"cgroups: {e}")
        return
    for version, path in found:
        try:
            if path.name == f"tb-{run_id}":  # a private engine's containers: their processes end with it
                _end(_cgroup_processes(path), rep)
            release_named(version, path)
            rep.cgroups.append(str(path))
        except Exception as e:  # noqa: BLE001 (ThrottleError, OSError: reported per cgroup)
            rep.errors.append(f"cgroup {path}: {e}")


def _cgroup_processes(path: Path) -> list:
    import psutil

    procs = []
    for f in path.rglob("cgroup.procs"):
        try:
            pids = [int(x) for x in f.read_text().split()]
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                procs.append(psutil.Process(pid))
            except psutil.Error:
                continue
    return list({p.pid: p for p in procs}.values())  # the same task in every v1 hierarchy


def _real_dir(path: str) -> bool | None:
    """True: a real directory; False: something else (a link, a file); None: nothing there."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def _remove_tree(path: str, what: str, rep: CleanReport) -> None:
    try:
        shutil.rmtree(path)
        rep.paths.append(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        rep.errors.append(f"{what} {path}: {e.strerror or e}")


def _tmp_dir_ok(path: str, run_id: str) -> bool | None:
    """None: nothing there; True: a real directory directly under the temp dir named tb-<run>-*."""
    kind = _real_dir(path)
    if kind is None:
        return None
    parent = os.path.realpath(os.path.dirname(path))
    return kind and parent == os.path.realpath(tempfile.gettempdir()) \
        and os.path.basename(path).startswith(f"tb-{run_id}-")


def _remove_tmp_dirs(paths: list[str], run_id: str, rep: CleanReport) -> None:
    tmp_root = os.path.realpath(tempfile.gettempdir())
    for path in paths:
        ok = _tmp_dir_ok(path, run_id)
        if ok is None:
            continue
        if not ok:
            rep.refused.append(f"temp folder {path!r}: not a real directory {tmp_root}/tb-{run_id}-*")
            continue
        _remove_tree(path, "temp folder", rep)


def _remove_partial_dirs(paths: list[str], rep: CleanReport) -> None:
    for path in paths:
        kind = _real_dir(path)
        if kind is None:
            continue
        if not kind or not os.path.isabs(path) or not PARTIAL_NAME_RE.match(os.path.basename(path)):
            rep.refused.append(f"partial results {path!r}: not a real directory named .NAME.partial-PID")
            continue
        _remove_tree(path, "partial results", rep)


def _engine_dir(run_id: str) -> str:
    from testbed.netem.owned.hostdirs import DEFAULT_BASE_DIR, engine_dir

    return str(engine_dir(run_id, os.path.realpath(DEFAULT_BASE_DIR)))


def _stop_dir_users(st: dict, run_id: str, rep: CleanReport) -> None:
    """Processes working in the run's own folders (checked as below, before removal): relays forked
    before their PIDs could be recorded (their command line holds the run's temp folder), a private
    engine's daemon, containerd and shims (paths under the engine directory)."""
    dirs = [p for p in st.get("tmp_dirs", []) if _tmp_dir_ok(p, run_id) is True]
    want = _engine_dir(run_id)
    if any(_resolved(p) == want and _real_dir(p) for p in st.get("engine_dirs", [])):
        dirs.append(want)
    _end(_processes_naming(dirs), rep)


def _resolved(path: str) -> str:
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _remove_engine_dirs(paths: list[str], run_id: str, rep: CleanReport) -> None:
    from testbed.netem.owned.hostdirs import unmount_under

    want = _engine_dir(run_id)
    for path in paths:
        kind = _real_dir(path)
        if kind is None:
            continue
        if not kind or _resolved(path) != want:
            rep.refused.append(f"engine directory {path!r}: not a real directory {want}")
            continue
        try:
            unmount_under(Path(path))
        except OSError as e:
            rep.errors.append(f"engine directory {path}: {e}")
            continue
        _remove_tree(path, "engine directory", rep)


def _guarded(rep: CleanReport, what: str, fn, *args) -> None:
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 (clean never crashes: each step reports its own failure)
        rep.errors.append(f"{what}: {type(e).__name__}: {e}")


def clean_run(run_id: str, *, force: bool = False) -> CleanReport:
    """Remove what run ``run_id``'s state file lists (see the module doc)."""
    rep = CleanReport(run_id)
    try:
        st = state.load(run_id)
    except FileNotFoundError:
        rep.skipped = "no state file (nothing testbed recorded for this run)"
        _remove_state_temps(run_id, rep)
        return rep
    except (OSError, state.StateFileError) as e:
        rep.skipped = f"{state.path_for(run_id)} is not a valid testbed state file ({e}); left alone"
        return rep
    owner = st["owner_pid"]
    if not force and owner != os.getpid() and st.get("purpose") != "net" and state.owner_alive(st):
        rep.skipped = f"owner process {owner} is alive (use --force to remove anyway)"
        return rep
    _guarded(rep, "processes", _stop_pids, st.get("pids", []), run_id, rep)
    _guarded(rep, "processes in the run's folders", _stop_dir_users, st, run_id, rep)
    _guarded(rep, "namespaces", _remove_namespaces, st.get("namespaces", []), run_id, rep)
    _guarded(rep, "interfaces", _remove_interfaces, st.get("interfaces", []), run_id, rep)
    _guarded(rep, "ovs userspace device", _remove_ovs_netdev, st.get("ovs_netdev"), rep)
    _guarded(rep, "cgroups", _remove_cgroups, st.get("cgroups", []), run_id, rep)  # after the processes
    _guarded(rep, "temp folders", _remove_tmp_dirs, st.get("tmp_dirs", []), run_id, rep)
    _guarded(rep, "partial results", _remove_partial_dirs, st.get("partial_dirs", []), rep)
    _guarded(rep, "engine directories", _remove_engine_dirs, st.get("engine_dirs", []), run_id, rep)
    _guarded(rep, "tcp_allowed_congestion_control", _release_tcp_cc, run_id, rep)
    _remove_state_temps(run_id, rep)
    if not rep.errors:
        try:
            state.remove(run_id)
            rep.paths.append(str(state.path_for(run_id)))
        except OSError as e:
            rep.errors.append(f"state file: {e.strerror or e}")
    return rep


def _release_tcp_cc(run_id: str, rep: CleanReport) -> None:
    from testbed.netem import tcp_cc

    for name in tcp_cc.release(run_id):
        rep.paths.append(f"{tcp_cc.PROC_IPV4 / 'tcp_allowed_congestion_control'}: {name} (added for the run)")


def _remove_state_temps(run_id: str, rep: CleanReport) -> None:
    for path in state.temp_files(run_id):
        try:
            path.unlink()
            rep.paths.append(str(path))
        except FileNotFoundError:
            pass
        except OSError as e:
            rep.errors.append(f"{path}: {e.strerror or e}")


def clean(run_id: str | None = None, *, force: bool = False) -> list[CleanReport]:
    """``run_id``: that run only; else every run with a valid state file."""
    targets = [run_id] if run_id else runs_present()
    reports = [clean_run(r, force=force) for r in targets]
    if run_id is None:  # settings noted for runs whose state files are gone
        from testbed.netem import tcp_cc

        with contextlib.suppress(OSError):
            tcp_cc.release(None)
    return reports


def strays() -> list[state.Stray]:
    """Entries of the state directory that are not valid state files (reported, never acted on)."""
    return state.scan()[1]

