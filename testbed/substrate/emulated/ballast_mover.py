"""``emulation.nodes: ballast``: a transfer server per site, and each migration sends
``size x byte_scale`` bytes of seeded ballast from the source namespace, chunked and SHA-256
verified. Its transfer time is *measured*; load and downtime are modelled."""

from __future__ import annotations

from testbed.netem.nsexec import socket_factory
from testbed.seeding import derive_seed
from testbed.substrate.base import MigrationOrder, MigrationOutcome
from testbed.substrate.emulated.mover import Emulation, Mover, order_lag, register_mover, transfer_id

TRANSFER_PORT = 7000


@register_mover
class BallastMover(Mover):
    nodes = "ballast"

    def __init__(self, inputs):
        super().__init__(inputs)
        self._em: Emulation | None = None
        self._servers: dict = {}

    def start(self, em: Emulation) -> None:
        from testbed.transfer.server import TransferServer

        self._em = em
        for s in em.fabric.plan.sites:
            srv = TransferServer(s.addr, TRANSFER_PORT, token=em.token,
                                 socket_factory=socket_factory(em.fabric.site_ns(s.name)))
            srv.start()
            self._servers[s.name] = srv

    def stop(self) -> None:
        for srv in self._servers.values():
            srv.stop()
        self._servers.clear()

    def migrate(self, order: MigrationOrder) -> MigrationOutcome:
        from testbed.transfer.client import send
        from testbed.transfer.source import BallastSource

        em = self._em
        assert em is not None
        model = self._in.scenario.substrate
        n_bytes = em.scaling.bytes_sent(order.size_gb)
        chunk = min(4 << 20, max(64 << 10, n_bytes // 16))
        t_begin = em.clock.now_s()
        try:
            source = BallastSource(n_bytes, seed=derive_seed(0, order.job_id) & 0xFFFFFFFF)
            source.manifest(chunk)  # hashing the ballast is an artefact of scale: not part of the transfer
            report = send(
                em.fabric.site_addr(order.dst), TRANSFER_PORT, source,
                transfer_id=transfer_id(order), token=em.token, chunk_bytes=chunk,
                socket_factory=socket_factory(em.fabric.site_ns(order.src)), cancel=em.cancel,
            )
            ok = report.status == "completed"
            transfer_s = em.scaling.scenario_s(report.t_transfer_s + report.t_connect_s + report.t_verify_s)
            detail = (f"measured: {n_bytes} B ballast over the emulated WAN, {report.goodput_mbps:.1f} Mbit/s wall; "
                      f"start lag {order_lag(order, t_begin):.3f} s; reconnects {report.reconnects}")
            if not ok:
                detail += f"; {report.error}"
        except Exception as e:  # a broken transfer is a failed migration, recorded, never a crash
            ok, transfer_s, detail = False, max(0.0, em.clock.now_s() - t_begin), f"transfer error: {e}"
        lag_s = order_lag(order, t_begin)
        return MigrationOutcome(
            order=order, status="completed" if ok else "failed",
            transfer_s=lag_s + transfer_s, load_s=model.t_load_s, downtime_s=model.t_downtime_s,
            goodput_gbps=8 * order.size_gb / transfer_s if transfer_s > 0 else 0.0, detail=detail,
            phases_measured=("transfer",),
        )

    def describe(self) -> dict:
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
