"""``emulation.nodes: agents``: a node agent per site runs each job's real training; a migration
is checkpoint_and_pause (src) -> send_checkpoint over the WAN -> load_and_resume (dst) -> free (src),
every phase measured. This mover is the substrate's throughput port
(:class:`~testbed.power.caps.ThroughputPort`): power backends slow a job's real training through it."""

from __future__ import annotations

import time

from testbed.errors import TestbedError
from testbed.power.caps import CapTarget, Throttled
from testbed.seeding import derive_seed
from testbed.substrate.base import MigrationOrder, MigrationOutcome
from testbed.substrate.emulated.mover import Emulation, Mover, order_lag, register_mover, transfer_id


@register_mover
class AgentMover(Mover):
    nodes = "agents"

    def __init__(self, inputs):
        super().__init__(inputs)
        self._em: Emulation | None = None
        self._pool = None
        self._job_site: dict[str, str] = {}
        self._specs = {j.id: j for j in inputs.jobs}

    def start(self, em: Emulation) -> None:
        from testbed.substrate.emulated.agents import AgentPool

        self._em = em
        self._pool = AgentPool(em.fabric, em.token, runtime=self._in.scenario.emulation.runtime)
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
            seed=derive_seed(self._in.seed, "job", job_id) & 0x7FFFFFFF, steps_per_s=self._in.scenario.emulation.steps_per_s,
        )
        self._job_site[job_id] = site

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
        testbed.power.throttle); the throttle's cgroup is listed in the state file before it is made."""
        from testbed.substrate.emulated.agents import agent_job_id

        if self._pool is None:
            raise TestbedError(f"no node agents run here: cannot throttle {job_id}")
        self._pool.expect_throttle(site, agent_job_id(job_id))
        res = self._pool.client(site).set_throughput(agent_job_id(job_id), frac=frac, cap_w=cap_w)
        return Throttled(res.frac, res.throttle, res.throttle_reason)

    # -- migration ---------------------------------------------------------------------------------
    def migrate(self, order: MigrationOrder) -> MigrationOutcome:
        """Any failure before the destination resumed: resume at the source, record the failure."""
        from testbed.agent.client import AgentError
        from testbed.substrate.emulated.agents import TRANSFER_PORT as AGENT_TRANSFER_PORT
        from testbed.substrate.emulated.agents import agent_job_id

        em = self._em
        assert em is not None and self._pool is not None
        jid = agent_job_id(order.job_id)
        src, dst = self._pool.client(order.src), self._pool.client(order.dst)
        sc_s = em.scaling.scenario_s
        lag_s = order_lag(order, em.clock.now_s())
        w0 = time.perf_counter()
        ck = src.checkpoint_and_pause(jid)
        w1 = time.perf_counter()
        ballast = max(0, em.scaling.bytes_sent(order.size_gb) - ck.size_bytes)
        try:
            sent = src.send_checkpoint(jid, dst_addr=em.fabric.site_addr(order.dst), dst_port=AGENT_TRANSFER_PORT,
                                       ballast_bytes=ballast, transfer_id=transfer_id(order))
            rep = sent.report
            if rep["status"] != "completed":
                raise AgentError(f"transfer {rep['status']}: {rep.get('error')}")
            w2 = time.perf_counter()
            loaded = dst.load_and_resume(jid, transfer_id=transfer_id(order), sha256=ck.sha256,
                                         steps_per_s=self._in.scenario.emulation.steps_per_s)
            w3 = time.perf_counter()
            src.free(jid)
            self._job_site[order.job_id] = order.dst
            status, detail = "completed", (f"measured: checkpoint {ck.size_bytes} B (step {ck.step}) + "
                                           f"{ballast} B ballast; {rep['goodput_mbps']:.1f} Mbit/s wall; "
                                           f"reconnects {rep['reconnects']}, chunk resends {rep['chunk_resends']}")
            t_transfer = rep["t_connect_s"] + rep["t_transfer_s"] + rep["t_verify_s"]
            t_load = loaded.t_load_s
        except AgentError as e:
            w2 = w3 = time.perf_counter()
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

    def describe(self) -> dict:
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
