"""``emulation.nodes: agents``: a node agent per site runs each job's real training; a migration
is checkpoint_and_pause (src) -> send_checkpoint over the WAN -> load_and_resume (dst) -> free (src),
every phase measured (disk phases scaled back to the real size at their measured throughput). This mover is the substrate's throughput port
(:class:`~testbed.power.caps.ThroughputPort`): power backends slow a job's real training through it."""

from __future__ import annotations

import time

from testbed.errors import TestbedError
from testbed.power.caps import CapTarget, Throttled
from testbed.seeding import derive_seed
from testbed.substrate.base import MigrationOrder, MigrationOutcome
from testbed.substrate.emulated.checkpoint_io import scaled_back_s
from testbed.substrate.emulated.mover import Emulation, Mover, order_lag, register_mover, transfer_id
from testbed.transfer.disk_io import IoTiming, sampled

SEND_FIXED_S = 60.0          # connecting, hashing, the manifest, and a busy host's delays
SEND_RATE_HEADROOM = 10.0    # the link may be degraded to a tenth of its configured rate mid-transfer
BALLAST_WRITE_FLOOR_BPS = 20e6  # the ballast is written and fsynced first, at no less than this
WARM_AGENTS = True  # agents import torch at start (testbed bench emulation turns it off for the path before)


def send_wait_s(wire_bytes: float, plan, src: str, dst: str) -> float:
    """How long the controller waits for an agent's transfer report: the fixed costs, plus the wire
    time at the src->dst link's configured (wall-clock) rate with headroom, plus writing the bytes.
    Sized from the work, so a large checkpoint on a slow link is not cut off at a fixed limit."""
    try:
        link = plan.link(src, dst)
        rate_mbit = link.end_at(src).rate_mbit
    except KeyError:  # routed over other sites: the slowest link bounds it
        rate_mbit = min(min(lk.rate_ab_mbit, lk.rate_ba_mbit) for lk in plan.links)
    wire_s = wire_bytes * 8 / (max(rate_mbit, 1e-3) * 1e6)
    return SEND_FIXED_S + SEND_RATE_HEADROOM * wire_s + wire_bytes / BALLAST_WRITE_FLOOR_BPS


@register_mover
class AgentMover(Mover):
    nodes = "agents"

    def __init__(self, inputs):
        super().__init__(inputs)
        self._em: Emulation | None = None
        self._pool = None
        self._job_site: dict[str, str] = {}
        self._specs = {j.id: j for j in inputs.jobs}
        self._containers: dict = {}  # docker runtime: base image, each site's image, GPUs (the manifest's)

    def start(self, em: Emulation) -> None:
        from testbed.spec.images import site_image_sources
        from testbed.substrate.emulated.agents import AgentPool

        self._em = em
        sc = self._in.scenario
        dirs = tuple(sorted({p.cwd for p in sc.workloads.programs.values() if p.cwd})) if sc.workloads else ()
        programs = sc.workloads.programs if sc.workloads else {}
        stand_in = any(j.family not in programs for j in self._in.jobs)  # a job the agents' torch trainer runs
        self._pool = AgentPool(em.fabric, em.token, runtime=sc.emulation.runtime, program_dirs=dirs,
                               images=site_image_sources(sc.emulation, [s.name for s in em.fabric.plan.sites]),
                               warm_torch=stand_in and WARM_AGENTS)
        self._containers = self._pool.runtime_info  # filled by start() (docker runtime); kept for describe()
        self._pool.start()

    def stop(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.stop()

    def start_job(self, job_id: str, site: str, t_s: float) -> None:
        if self._pool is None:
            return
        from testbed.substrate.emulated.agents import agent_job_id

        spec = self._specs[job_id]
        self._pool.client(site).start_job(
            agent_job_id(job_id), family=spec.family,
            seed=self._seed(job_id), steps_per_s=self._in.scenario.emulation.steps_per_s,
            program=self._program(job_id), model_mb=self._in.scenario.emulation.model_mb,
        )
        self._job_site[job_id] = site

    def _seed(self, job_id: str) -> int:
        return derive_seed(self._in.seed, "job", job_id) & 0x7FFFFFFF

    def _program(self, job_id: str) -> dict | None:
        """The user's program the job's family names (workloads.programs), as the agent takes it."""
        wl = self._in.scenario.workloads
        prog = wl.programs.get(self._specs[job_id].family) if wl is not None else None
        return prog.model_dump(mode="json") if prog is not None else None

    def finish_job(self, job_id: str, t_s: float) -> None:
        if self._pool is None or job_id not in self._job_site:
            return
        from testbed.substrate.emulated.agents import agent_job_id

        self._pool.client(self._job_site.pop(job_id)).free(agent_job_id(job_id))

    # -- the throughput port -----------------------------------------------------------------------
    def cap_target(self) -> CapTarget:
        """Each job's real training can be slowed (``power.backend`` emulated / emulated-throttle)."""
        return CapTarget(self.nodes, self)

    def job_site(self, job_id: str, site: str) -> str:
        return self._job_site.get(job_id, site)

    def set_throughput(self, job_id: str, site: str, frac: float, cap_w: float) -> Throttled:
        """The agent at ``site`` slows ``job_id``'s training to ``frac`` (its CPU throttle; see
        testbed.power.throttle.throttle); the throttle's cgroup is listed in the state file before it is made."""
        from testbed.substrate.emulated.agents import agent_job_id

        if self._pool is None:
            raise TestbedError(f"no node agents run here: cannot throttle {job_id}")
        self._pool.expect_throttle(site, agent_job_id(job_id))
        res = self._pool.client(site).set_throughput(agent_job_id(job_id), frac=frac, cap_w=cap_w)
        return Throttled(res.frac, res.throttle, res.throttle_reason, res.details.get("window"))

    def set_throughputs(self, requests: list[tuple[str, str, float, float]]) -> dict[str, Throttled | TestbedError]:
        """:meth:`set_throughput` for several jobs in one round trip: one ``set_throughputs`` command
        per agent, the agents asked concurrently. Per job its answer, or the error that refused it."""
        from testbed.agent.client import AgentError
        from testbed.substrate.emulated.agents import agent_job_id

        if self._pool is None:
            raise TestbedError("no node agents run here: cannot throttle")
        by_site: dict[str, list[tuple[str, float, float]]] = {}
        for job_id, site, frac, cap_w in requests:
            self._pool.expect_throttle(site, agent_job_id(job_id))
            by_site.setdefault(site, []).append((job_id, frac, cap_w))

        def ask(site: str) -> list:
            items = by_site[site]
            try:
                return self._pool.client(site).set_throughputs([(agent_job_id(j), f, c) for j, f, c in items])
            except AgentError as e:  # the whole command failed: every job of it gets the error
                return [e] * len(items)

        out: dict[str, Throttled | TestbedError] = {}
        for site, answers in zip(by_site, self._pool.map_sites(ask, list(by_site))):
            for (job_id, _, _), res in zip(by_site[site], answers):
                out[job_id] = res if isinstance(res, TestbedError) else Throttled(
                    res.frac, res.throttle, res.throttle_reason, res.details.get("window"))
        return out

    # -- migration ---------------------------------------------------------------------------------
    def migrate(self, order: MigrationOrder) -> MigrationOutcome:
        """Any failure before the destination resumed: resume at the source, record the failure.

        Phases, in scenario seconds for the real checkpoint of ``S`` bytes (``.checkpoint_io``):
        checkpoint = per file + S / save throughput (the real checkpoint serialised, hashed, written,
        fsynced plus the ballast written and fsynced, at the source); transfer = wire time x
        time_scale; load = per file + S / load throughput (fsync, read back from the device, SHA-256
        + torch.load, at the destination); both throughputs on samples of at least
        ``SAMPLE_MIN_BYTES`` (``disk_io.sampled``); downtime = pausing the job + restoring and
        resuming it (wall seconds: fixed costs, not scaled). Control round trips are ``control_wall_s``, in no phase."""
        from testbed.agent.client import AgentError
        from testbed.substrate.emulated.agents import TRANSFER_PORT as AGENT_TRANSFER_PORT
        from testbed.substrate.emulated.agents import agent_job_id

        em = self._em
        assert em is not None and self._pool is not None
        jid = agent_job_id(order.job_id)
        src, dst = self._pool.client(order.src), self._pool.client(order.dst)
        real_bytes = order.checkpoint_gb * 1e9
        lag_s = order_lag(order, em.clock.now_s())
        w0 = time.perf_counter()
        try:
            ck = src.checkpoint_and_pause(jid)
        except AgentError as e:  # a user's program that broke the checkpoint contract (testbed.userjob)
            return self._checkpoint_failed(order, src, jid, e, lag_s, time.perf_counter() - w0)
        ballast = max(0, em.scaling.bytes_sent(order.checkpoint_gb) - ck.size_bytes)
        save = IoTiming(ck.size_bytes, ck.t_save_s)
        load = None
        agent_s = ck.t_checkpoint_s  # wall seconds the agents spent working (the rest is control)
        t_transfer = t_restore = 0.0
        try:
            w1 = time.perf_counter()
            sent = src.send_checkpoint(jid, dst_addr=em.fabric.site_addr(order.dst), dst_port=AGENT_TRANSFER_PORT,
                                       ballast_bytes=ballast, transfer_id=transfer_id(order),
                                       timeout_s=send_wait_s(ck.size_bytes + ballast, em.fabric.plan,
                                                             order.src, order.dst))
            rep = sent.report
            top_up = IoTiming.from_dict(sent.save_top_up)
            save = sampled(save + IoTiming(sent.ballast_bytes, sent.t_ballast_save_s, int(sent.ballast_bytes > 0)),
                           top_up)
            t_transfer = rep["t_connect_s"] + rep["t_transfer_s"] + rep["t_verify_s"]
            agent_s += (sent.t_ballast_save_s + top_up.seconds + top_up.per_file_s + rep.get("t_manifest_s", 0.0)
                        + t_transfer)
            if rep["status"] != "completed":
                raise AgentError(f"transfer {rep['status']}: {rep.get('error')}")
            loaded = dst.load_and_resume(jid, transfer_id=transfer_id(order), sha256=ck.sha256,
                                         steps_per_s=self._in.scenario.emulation.steps_per_s,
                                         checkpoint_bytes=ck.size_bytes, program=self._program(order.job_id),
                                         seed=self._seed(order.job_id) if self._program(order.job_id) else None)
            load = sampled(IoTiming(loaded.bytes_read, loaded.t_persist_s + loaded.t_read_s + loaded.t_deserialize_s),
                           IoTiming.from_dict(loaded.load_top_up))
            t_restore = loaded.t_restore_s
            agent_s += loaded.t_load_s
            src.free(jid)
            self._job_site[order.job_id] = order.dst
            status, detail = "completed", (f"measured: checkpoint {ck.size_bytes} B (step {ck.step}) + "
                                           f"{ballast} B ballast; {rep['goodput_mbps']:.1f} Mbit/s wall; "
                                           f"reconnects {rep['reconnects']}, chunk resends {rep['chunk_resends']}; "
                                           f"save {save.bytes_per_s / 1e6:.0f} MB/s, load {load.bytes_per_s / 1e6:.0f} "
                                           f"MB/s (persist {loaded.t_persist_s:.3f} s, read {loaded.t_read_s:.3f} s, "
                                           f"torch.load {loaded.t_deserialize_s:.3f} s)")
        except AgentError as e:
            if not t_transfer:
                t_transfer = time.perf_counter() - w1
            try:
                src.resume(jid)
                kept = "job resumed at the source from its checkpoint"
            except AgentError as e2:
                kept = f"resume at the source failed too: {e2}"
            status, detail = "failed", f"{e}; {kept}"
        wall = time.perf_counter() - w0
        transfer_s = em.scaling.scenario_s(t_transfer)
        return MigrationOutcome(
            order=order, status=status, checkpoint_s=scaled_back_s(save, real_bytes), transfer_s=transfer_s,
            load_s=scaled_back_s(load, real_bytes) if load is not None else 0.0,
            downtime_s=ck.t_pause_s + t_restore,
            goodput_gbps=8 * order.checkpoint_gb / transfer_s if transfer_s > 0 else 0.0, detail=detail,
            phases_measured=("checkpoint", "transfer", "load", "downtime"), checkpoint_bytes=ck.size_bytes,
            start_lag_s=lag_s, control_wall_s=em.scaling.wall_s(lag_s) + max(0.0, wall - agent_s),
            io_bytes=ck.size_bytes + ballast, io_sample_bytes=save.n_bytes, save_bytes_per_s=save.bytes_per_s,
            load_bytes_per_s=load.bytes_per_s if load is not None else None,
        )

    def _checkpoint_failed(self, order: MigrationOrder, src, jid: str, error: Exception, lag_s: float,
                           wall_s: float) -> MigrationOutcome:
        """No checkpoint: nothing moved; the job restarts at the source from its last good checkpoint."""
        from testbed.agent.client import AgentError

        try:
            src.resume(jid)
            kept = "job resumed at the source from its last checkpoint"
        except AgentError as e2:
            kept = f"resume at the source failed too: {e2}"
        em = self._em
        assert em is not None
        return MigrationOutcome(order=order, status="failed", transfer_s=0.0, load_s=0.0, downtime_s=0.0,
                                goodput_gbps=0.0, detail=f"checkpoint failed: {error}; {kept}", phases_measured=(),
                                start_lag_s=lag_s, control_wall_s=em.scaling.wall_s(lag_s) + wall_s)

    def describe(self) -> dict:
        return {
            "nodes": f"agents ({self._in.scenario.emulation.runtime} runtime): a real PyTorch job per running "
                     "job, real checkpoints",
            **({"containers": self._containers} if self._containers else {}),
            "measured": ["checkpoint_s (source agent: the real checkpoint serialised, hashed, written, fsynced + "
                         "ballast to size x byte_scale written, fsynced; real size / measured MB/s)",
                         "transfer_s (real checkpoint + ballast over the shaped WAN, connect to final ack, "
                         "x time_scale)",
                         "load_s (destination agent: fsync, read back from the device, SHA-256 + torch.load; real "
                         "size / measured MB/s)",
                         "downtime_s (pausing the job + restoring and resuming it; wall seconds)", "goodput"],
            "control": "start_lag_s (scenario s between decision and pause) and control_s (wall s of command round "
                       "trips, outside the agents' work) are recorded apart, in no phase",
            "modelled": {
                "job_progress": "node speed x the profile's throughput at the cap x time (GPU-hours); real "
                                "training runs paced and, with power.backend auto, throttled to that same "
                                "throughput fraction (power.parquet: throttle), for real checkpoints and a real "
                                "slowdown, not for progress",
                "energy": "node power profile x time; renewable share from the true renewable trace",
            },
        }
