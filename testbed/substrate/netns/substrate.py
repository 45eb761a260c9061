"""The netns substrate: sites are network namespaces joined by shaped WAN links, and every
migration's checkpoint bytes really cross them through the transfer service.

- Links get the scenario's bandwidth (scaled: ``B x byte_scale x time_scale``), replayed from the
  bandwidth traces with ``tc change`` in place, and the scenario's latency/jitter/loss (scaled by
  1/time_scale) through netem where the kernel has it, else through the userspace delay relay.
  A scenario that needs latency and cannot get it fails — never silently less.
- Each site runs a transfer server on its site address; a migration sends ``size x byte_scale``
  bytes of seeded ballast from the source namespace, chunked and SHA-256 verified. Its transfer
  time is *measured*; load and downtime are modelled (real checkpoints come with node agents).
- The clock runs at ``time_scale`` while transfers are in flight and skips idle time.
"""

from __future__ import annotations

import re
import secrets
import threading

from testbed.errors import SpecError, TestbedError
from testbed.inputs import Inputs
from testbed.lifecycle import critical
from testbed.seeding import derive_seed
from testbed.netem.fabric import Fabric
from testbed.netem.naming import new_run_id
from testbed.netem.nsexec import socket_factory
from testbed.netem.plan import plan_fabric, unreachable
from testbed.spec.topology import directed_links
from testbed.power.caps import CapTarget, Throttled
from testbed.substrate.base import MigrationOrder, MigrationOutcome, Substrate
from testbed.substrate.netns.clock import EmulationClock
from testbed.substrate.netns.replay import LinkReplayer, change_points
from testbed.netem.links import scenario_links
from testbed.netem.scaling import CAPACITY_MBIT_DIRECT, CAPACITY_MBIT_RELAY, Scaling, choose_scaling

TRANSFER_PORT = 7000


class EmulatedSubstrate(Substrate):
    """Shared by every live network substrate; subclasses say how the fabric is built."""

    name = "emulated"

    def make_fabric(self, plan):
        raise NotImplementedError

    def __init__(self, inputs: Inputs, *, impairment: str = "auto", capacity_mbit: float | None = None,
                 run_id: str | None = None, skip_idle: bool = True):
        self._in = inputs
        self.run_id = run_id or new_run_id()
        self._impairment_req = impairment
        self._capacity = capacity_mbit
        self._skip_idle = skip_idle
        self._token = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._done: list[MigrationOutcome] = []
        self._flying: dict[str, tuple[MigrationOrder, threading.Thread]] = {}
        self._changed = threading.Condition(self._lock)
        self._cancel = threading.Event()
        self._servers: dict = {}
        self._agents = None
        self._job_site: dict[str, str] = {}
        self._specs = {j.id: j for j in inputs.jobs}
        self.fabric: Fabric | None = None
        self.scaling: Scaling | None = None
        self.clock: EmulationClock | None = None
        self._replayer: LinkReplayer | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> "EmulatedSubstrate":
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def open(self) -> None:
        sc = self._in.scenario
        from testbed.doctor.qdisc import detect_impairment

        impairment = detect_impairment() if self._impairment_req == "auto" else self._impairment_req
        wants_latency = any(
            link.latency_ms != 0 or link.jitter_ms > 0 or link.loss_pct > 0 for link in sc.links
        )
        if impairment == "none" and wants_latency and sc.emulation.require_latency:
            raise SpecError([("emulation.require_latency", "links ask for latency/jitter/loss but impairment "
                              "'none' was requested; allow the relay or netem, or set require_latency: false")])
        capacity = self._capacity or (CAPACITY_MBIT_RELAY if impairment == "relay" else CAPACITY_MBIT_DIRECT)
        directed = directed_links(sc.sites, sc.links)
        self.scaling = choose_scaling(sc, capacity_mbit=capacity, links=directed)
        links = scenario_links(self._in, self.scaling, directed, impaired=impairment != "none")
        plan = plan_fabric(self.run_id, [s.name for s in sc.sites], links, impairment)  # type: ignore[arg-type]
        missing = unreachable(plan)
        if missing:
            raise SpecError([("links", f"site {missing[0][1]} is unreachable from {missing[0][0]}")])
        self.fabric = self.make_fabric(plan)
        self.fabric.up()
        if sc.emulation.nodes == "agents":
            from testbed.substrate.netns.agents import AgentPool

            self._agents = AgentPool(self.fabric, self._token, runtime=sc.emulation.runtime)
            self._agents.start()
        else:
            self._start_servers()
        self.clock = EmulationClock(self.scaling.time_scale, skip_idle=self._skip_idle)
        self.clock.start(0.0)
        changes = change_points(self._in.bandwidth_gbps, self.scaling.rate_mbit, sc.duration_s)
        self._replayer = LinkReplayer(changes, self.clock, self.fabric.set_rate, self.fabric.release_netlink)
        self._replayer.start()

    def _start_servers(self) -> None:
        from testbed.transfer.server import TransferServer

        for s in self.fabric.plan.sites:  # type: ignore[union-attr]
            srv = TransferServer(s.addr, TRANSFER_PORT, token=self._token,
                                 socket_factory=socket_factory(self.fabric.site_ns(s.name)))  # type: ignore[union-attr]
            srv.start()
            self._servers[s.name] = srv

    def close(self) -> None:
        """Idempotent, and not cut short by Ctrl-C/SIGTERM (deferred until it is done); the fabric
        goes even if stopping something before it failed."""
        with critical():
            try:
                self._cancel.set()
                if self._replayer is not None:
                    self._replayer.stop()
                for _, th in list(self._flying.values()):
                    th.join(timeout=10)
                for srv in self._servers.values():
                    srv.stop()
                self._servers.clear()
                if self._agents is not None:
                    agents, self._agents = self._agents, None
                    agents.stop()
            finally:
                if self.fabric is not None:
                    self.fabric.down()

    # -- the contract ------------------------------------------------------------------------------
    def start_migration(self, order: MigrationOrder) -> None:
        th = threading.Thread(target=self._migrate, args=(order,), name=f"tb-migrate-{order.job_id}", daemon=True)
        with self._lock:
            self._flying[order.job_id] = (order, th)
        th.start()

    def start_job(self, job_id: str, site: str, t_s: float) -> None:
        if self._agents is None:
            return
        from testbed.substrate.netns.agents import agent_job_id

        spec = self._specs[job_id]
        self._agents.client(site).start_job(
            agent_job_id(job_id), family=spec.family,
            seed=derive_seed(self._in.seed, "job", job_id) & 0x7FFFFFFF, steps_per_s=self._in.scenario.emulation.steps_per_s,
        )
        self._job_site[job_id] = site

    def cap_target(self) -> CapTarget:
        """Ballast: nothing trains, caps are modelled. Agents: each job's real training can be slowed
        (this substrate is the throughput port: ``power.backend`` emulated / emulated-throttle)."""
        nodes = self._in.scenario.emulation.nodes
        return CapTarget(nodes, self if nodes == "agents" else None)

    def job_site(self, job_id: str, site: str) -> str:
        return self._job_site.get(job_id, site)

    def set_throughput(self, job_id: str, site: str, frac: float, cap_w: float) -> Throttled:
        """The agent at ``site`` slows ``job_id``'s training to ``frac`` (its CPU throttle; see
        testbed.power.throttle); the throttle's cgroup is listed in the state file before it is made."""
        from testbed.substrate.netns.agents import agent_job_id

        if self._agents is None:
            raise TestbedError(f"no node agents run here: cannot throttle {job_id}")
        self._agents.expect_throttle(site, agent_job_id(job_id))
        res = self._agents.client(site).set_throughput(agent_job_id(job_id), frac=frac, cap_w=cap_w)
        return Throttled(res.frac, res.throttle, res.throttle_reason)

    def finish_job(self, job_id: str, t_s: float) -> None:
        if self._agents is None or job_id not in self._job_site:
            return
        from testbed.substrate.netns.agents import agent_job_id

        self._agents.client(self._job_site.pop(job_id)).free(agent_job_id(job_id))

    def _migrate(self, order: MigrationOrder) -> None:
        if self._agents is not None:
            outcome = self._migrate_agents(order)
            with self._changed:
                self._flying.pop(order.job_id, None)
                self._done.append(outcome)
                self._changed.notify_all()
            return
        from testbed.transfer.client import send
        from testbed.transfer.source import BallastSource

        assert self.scaling and self.clock and self.fabric
        model = self._in.scenario.substrate
        n_bytes = self.scaling.bytes_sent(order.size_gb)
        chunk = min(4 << 20, max(64 << 10, n_bytes // 16))
        t_begin = self.clock.now_s()
        try:
            source = BallastSource(n_bytes, seed=derive_seed(0, order.job_id) & 0xFFFFFFFF)
            source.manifest(chunk)  # hashing the ballast is an artefact of scale: not part of the transfer
            report = send(
                self.fabric.site_addr(order.dst), TRANSFER_PORT, source,
                transfer_id=transfer_id(order), token=self._token, chunk_bytes=chunk,
                socket_factory=socket_factory(self.fabric.site_ns(order.src)), cancel=self._cancel,
            )
            ok = report.status == "completed"
            transfer_s = self.scaling.scenario_s(report.t_transfer_s + report.t_connect_s + report.t_verify_s)
            detail = (f"measured: {n_bytes} B ballast over the emulated WAN, {report.goodput_mbps:.1f} Mbit/s wall; "
                      f"start lag {order_lag(order, t_begin):.3f} s; reconnects {report.reconnects}")
            if not ok:
                detail += f"; {report.error}"
        except Exception as e:  # a broken transfer is a failed migration, recorded, never a crash
            ok, transfer_s, detail = False, max(0.0, self.clock.now_s() - t_begin), f"transfer error: {e}"
        lag_s = order_lag(order, t_begin)
        outcome = MigrationOutcome(
            order=order, status="completed" if ok else "failed",
            transfer_s=lag_s + transfer_s, load_s=model.t_load_s, downtime_s=model.t_downtime_s,
            goodput_gbps=8 * order.size_gb / transfer_s if transfer_s > 0 else 0.0, detail=detail,
            phases_measured=("transfer",),
        )
        with self._changed:
            self._flying.pop(order.job_id, None)
            self._done.append(outcome)
            self._changed.notify_all()

    def _migrate_agents(self, order: MigrationOrder) -> MigrationOutcome:
        """checkpoint_and_pause (src) -> send_checkpoint over the WAN -> load_and_resume (dst) -> free (src).
        Any failure before the destination resumed: resume at the source, record the failure."""
        import time as _time

        from testbed.agent.client import AgentError
        from testbed.substrate.netns.agents import TRANSFER_PORT as AGENT_TRANSFER_PORT
        from testbed.substrate.netns.agents import agent_job_id

        assert self.scaling and self.clock and self.fabric and self._agents
        jid = agent_job_id(order.job_id)
        src, dst = self._agents.client(order.src), self._agents.client(order.dst)
        sc_s = self.scaling.scenario_s
        lag_s = order_lag(order, self.clock.now_s())
        w0 = _time.perf_counter()
        ck = src.checkpoint_and_pause(jid)
        w1 = _time.perf_counter()
        ballast = max(0, self.scaling.bytes_sent(order.size_gb) - ck.size_bytes)
        try:
            sent = src.send_checkpoint(jid, dst_addr=self.fabric.site_addr(order.dst), dst_port=AGENT_TRANSFER_PORT,
                                       ballast_bytes=ballast, transfer_id=transfer_id(order))
            rep = sent.report
            if rep["status"] != "completed":
                raise AgentError(f"transfer {rep['status']}: {rep.get('error')}")
            w2 = _time.perf_counter()
            loaded = dst.load_and_resume(jid, transfer_id=transfer_id(order), sha256=ck.sha256,
                                         steps_per_s=self._in.scenario.emulation.steps_per_s)
            w3 = _time.perf_counter()
            src.free(jid)
            self._job_site[order.job_id] = order.dst
            status, detail = "completed", (f"measured: checkpoint {ck.size_bytes} B (step {ck.step}) + "
                                           f"{ballast} B ballast; {rep['goodput_mbps']:.1f} Mbit/s wall; "
                                           f"reconnects {rep['reconnects']}, chunk resends {rep['chunk_resends']}")
            t_transfer = rep["t_connect_s"] + rep["t_transfer_s"] + rep["t_verify_s"]
            t_load = loaded.t_load_s
        except AgentError as e:
            w2 = w3 = _time.perf_counter()
            try:
                src.resume(jid)
                kept = "job resumed at the source from its checkpoint"
            except AgentError as e2:
                kept = f"resume at the source failed too: {e2}"
            status, detail = "failed", f"{e}; {kept}"
            t_transfer, t_load = w2 - w1, 0.0
        total_wall = w3 - w0
        overhead = max(0.0, total_wall - ck.t_checkpoint_s - t_transfer - t_load)
        return MigrationOutcome(
            order=order, status=status, checkpoint_s=lag_s + sc_s(ck.t_checkpoint_s), transfer_s=sc_s(t_transfer),
            load_s=sc_s(t_load), downtime_s=sc_s(overhead),
            goodput_gbps=8 * order.size_gb / sc_s(t_transfer) if t_transfer > 0 else 0.0, detail=detail,
            phases_measured=("checkpoint", "transfer", "load", "downtime"), checkpoint_bytes=ck.size_bytes,
        )

    def poll(self, until_s: float) -> list[MigrationOutcome]:
        assert self.clock is not None
        if self._replayer is not None and self._replayer.error is not None:
            raise TestbedError(f"link replay failed: {self._replayer.error}")
        with self._changed:
            while True:
                if not self._flying and self.clock.skip_idle:
                    self.clock.jump_to(until_s)
                remaining = until_s - self.clock.now_s()
                if remaining <= 0:
                    break
                self._changed.wait(timeout=min(0.05, remaining / self.clock.time_scale))
            ready = sorted((o for o in self._done if o.resume_s <= until_s), key=lambda o: o.resume_s)
            for o in ready:
                self._done.remove(o)
        return ready

    def in_flight(self) -> list[MigrationOrder]:
        with self._lock:
            return [o for o, _ in self._flying.values()] + [o.order for o in self._done]

    def describe(self) -> dict:
        s = self.scaling
        applied = self._replayer.applied if self._replayer else []
        live = [a for a in applied if not a["after_jump"]]
        return {
            "substrate": self.name,
            "run_id": self.run_id,
            "clock": "wall x time_scale while transfers are in flight; idle time skipped" if self._skip_idle
            else "wall x time_scale",
            "impairment": self.fabric.plan.impairment if self.fabric else None,
            **(s.to_dict() if s else {}),
            "fabric_up_s": self.fabric.up_s if self.fabric else None,
            "skipped_scenario_s": self.clock.skipped_s if self.clock else None,
            "rate_changes": len(applied),
            "rate_change_max_lag_wall_ms": max((a["lag_wall_ms"] for a in live), default=None),
            "rate_change_max_call_ms": max((a["call_ms"] for a in applied), default=None),
            **self._measured_vs_modelled(),
        }

    def _measured_vs_modelled(self) -> dict:
        if self._in.scenario.emulation.nodes == "agents":
            return {
                "nodes": f"agents ({self._in.scenario.emulation.runtime} runtime): a real PyTorch job per running "
                         "job, real checkpoints",
                "measured": ["checkpoint_s (real checkpoint at the source agent)",
                             "transfer_s (real checkpoint + ballast to size x byte_scale, over the shaped WAN)",
                             "load_s (SHA-256 check + load at the destination agent)",
                             "downtime_s (pause-to-resume minus the phases above: control round trips)", "goodput"],
                "modelled": {
                    "job_progress": "node speed x the profile's throughput at the cap x time (GPU-hours); real "
                                    "training runs paced and, with power.backend emulated, throttled to that same "
                                    "throughput fraction (power.parquet: throttle), for real checkpoints and a real "
                                    "slowdown, not for progress",
                    "energy": "node power profile x time; renewable share from the true renewable trace",
                },
            }
        return {
            "nodes": "ballast: seeded bytes of the checkpoint's scaled size",
            "measured": ["transfer_s (checkpoint bytes x byte_scale over the shaped WAN)", "goodput"],
            "modelled": {
                "load_s": f"constant {self._in.scenario.substrate.t_load_s} s",
                "downtime_s": f"constant {self._in.scenario.substrate.t_downtime_s} s + controller start lag",
                "job_progress": "node speed x power cap x time (GPU-hours)",
                "energy": "node power profile x time; renewable share from the true renewable trace",
            },
        }


class NetnsSubstrate(EmulatedSubstrate):
    """Sites as named network namespaces built with pyroute2 (the default for emulation)."""

    name = "netns"

    def make_fabric(self, plan):
        return Fabric(plan)


def transfer_id(order: MigrationOrder) -> str:
    """A transfer-service id: job and decision time, restricted to [A-Za-z0-9._-]."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"m.{order.job_id}.{order.t_start_s:.0f}")[:128]


def order_lag(order: MigrationOrder, t_begin_s: float) -> float:
    """Scenario seconds between the controller's decision and the transfer's real start."""
    return max(0.0, t_begin_s - order.t_start_s)
