"""A live WAN from Python (root): what ``testbed net up / exec / set / status / down`` do, as a handle.

    import testbed
    with testbed.net.up("scenarios/quickstart.yaml", replay=True) as wan:
        wan.sites                                   # {"rome": "10.200.0.1", ...}
        wan.exec("rome", ["ping", "-c", "3", wan.sites["paris"]])   # -> subprocess.CompletedProcess
        p = wan.exec("paris", "iperf3 -s -1", background=True)      # -> subprocess.Popen (ended on exit)
        wan.set("rome-paris", bandwidth_mbit=50, delay_ms=20, direction="rome->paris")
        wan.status()["links"]                       # current values, per direction

The network is listed under ``/run/testbed`` like any held network, so ``testbed net status`` and
``testbed net set`` in another shell see and change it; it is torn down when the block ends.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Sequence


class Wan:
    """A held network owned by this process (see :func:`up`)."""

    def __init__(self, path: str | Path, *, impairment: str = "auto", replay: bool = False,
                 tcp_congestion: str | None = None):
        self.path = Path(path)
        self._tcp_congestion = tcp_congestion
        self._impairment = impairment
        self._replay = replay
        self._fab = None
        self._replayer = None
        self._procs: list[subprocess.Popen] = []

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "Wan":
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        from testbed.netem.fabric import Fabric, require_root
        from testbed.net.held import make_live, plan_held, resolve
        from testbed.netem.owned.naming import new_run_id

        require_root("testbed.net.up")
        held = plan_held(self.path, new_run_id(), resolve(self._impairment), replay=self._replay,
                         tcp_congestion=self._tcp_congestion)
        self._fab = Fabric(held.plan, purpose="net")
        self._fab.up()
        try:
            self._replayer = make_live(self._fab, held, detached=False)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Idempotent: stop the replay and the processes started in the background, then the network."""
        from testbed.lifecycle import critical
        from testbed.netem.nsexec import terminate

        with critical():
            if self._replayer is not None:
                self._replayer.stop()
                self._replayer = None
            terminate(self._procs, timeout_s=3)
            self._procs.clear()
            if self._fab is not None:
                self._fab.down()
                self._fab = None

    # -- use ---------------------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self._held().plan.run_id

    @property
    def sites(self) -> dict[str, str]:
        """Site name -> its address (reachable from every other site over the shaped links)."""
        return {s.name: s.addr for s in self._held().plan.sites}

    def exec(self, site: str, cmd: str | Sequence[str], *, background: bool = False, check: bool = False,
             timeout: float | None = None, capture: bool = True, **popen_kw):
        """Run ``cmd`` (a list, or a string split like a shell would, without a shell) inside ``site``.
        Waits and returns a ``CompletedProcess`` (text output captured unless ``capture=False``), or with
        ``background=True`` returns the ``Popen`` at once (ended by PID when the network goes)."""
        from testbed.errors import SpecError
        from testbed.netem.nsexec import spawn

        fab = self._held()
        if site not in self.sites:
            raise SpecError([("site", f"unknown site {site!r} (sites: {sorted(self.sites)})")])
        argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
        if not argv:
            raise SpecError([("cmd", "empty command")])
        if capture and not background:
            popen_kw.setdefault("stdout", subprocess.PIPE)
            popen_kw.setdefault("stderr", subprocess.PIPE)
        popen_kw.setdefault("text", True)
        try:
            proc = spawn(fab.site_ns(site), argv, **popen_kw)
        except FileNotFoundError:
            raise SpecError([("cmd", f"command not found: {argv[0]}")]) from None
        if background:
            self._procs.append(proc)
            return proc
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            terminate_one(proc)
            raise
        done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check:
            done.check_returncode()
        return done

    def set(self, link: str, *, bandwidth_mbit: float | None = None, delay_ms: float | None = None,
            jitter_ms: float | None = None, loss_pct: float | None = None, direction: str = "both") -> dict:
        """Change ``link`` ("a-b") in place, in one direction ("a->b", "b->a", "SITE->SITE") or both;
        returns its current values (as :meth:`status` lists them)."""
        from testbed.netem.live import LinkChange, LiveNet

        return LiveNet(self.run_id).set(link, LinkChange(bandwidth_mbit, delay_ms, jitter_ms, loss_pct, direction))

    def status(self) -> dict:
        """The network's state: sites, links with their current values per direction, the replay's progress."""
        from testbed.netem.owned import state

        self._held()
        return state.read(self.run_id) or {}

    def _held(self):
        if self._fab is None:
            from testbed.errors import TestbedError

            raise TestbedError("the network is not up (use it inside `with testbed.net.up(...) as wan:`)")
        return self._fab


def terminate_one(proc: subprocess.Popen) -> None:
    from testbed.netem.nsexec import terminate

    terminate([proc], timeout_s=3)


def up(path: str | Path, *, impairment: str = "auto", replay: bool = False, tcp_congestion: str | None = None) -> Wan:
    """A live WAN of a scenario or topology file, for a ``with`` block (see the module doc).
    ``replay=True``: the scenario's bandwidth traces and degradation events play out in real time x
    its ``emulation.time_scale`` (at the scaling an emulated run uses); without it, the links hold
    the file's real rates. ``impairment``: auto | relay | netem | none, as ``testbed net up``.
    ``tcp_congestion``: the sites' TCP congestion control (cubic, bbr, ..., host), as
    ``--tcp-congestion``; default: the scenario's ``emulation.tcp_congestion``, else cubic."""
    return Wan(path, impairment=impairment, replay=replay, tcp_congestion=tcp_congestion)
