"""``emulation.nodes: ballast``: a transfer server per site, and each migration moves
``size x byte_scale`` bytes of seeded ballast through the path a checkpoint takes: written to a
file at the source (``fsync``), sent from it over the shaped WAN from the source namespace,
chunked and SHA-256 verified, stored at the destination, made durable and read back from the
device. Every phase is *measured* (:mod:`.checkpoint_io`): transfer on the emulation's clock,
save and load as disk throughputs (on at least ``SAMPLE_MIN_BYTES``) scaled back to the real
size, downtime as the storage path's per-file overhead (an empty checkpoint saved, made durable
and read back: there is no job to pause)."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from pathlib import Path

from testbed.lifecycle import critical
from testbed.netem.owned import state
from testbed.netem.nsexec import socket_factory
from testbed.seeding import derive_seed
from testbed.substrate.base import MigrationOrder, MigrationOutcome
from testbed.substrate.emulated.checkpoint_io import remove, scaled_back_s
from testbed.substrate.emulated.mover import Emulation, Mover, order_lag, register_mover, transfer_id

TRANSFER_PORT = 7000


@register_mover
class BallastMover(Mover):
    nodes = "ballast"

    def __init__(self, inputs):
        super().__init__(inputs)
        self._em: Emulation | None = None
        self._servers: dict = {}
        self._dir: Path | None = None

    def start(self, em: Emulation) -> None:
        from testbed.transfer.server import TransferServer

        self._em = em
        run_id = em.fabric.plan.run_id
        path = Path(tempfile.gettempdir()) / f"tb-{run_id}-ckpt-{secrets.token_hex(4)}"
        with critical():  # listed in the run's state file, then made: testbed clean finds it
            state.add(run_id, tmp_dirs=[str(path)])
            path.mkdir(mode=0o700)
            self._dir = path
        for s in em.fabric.plan.sites:
            site_dir = self._dir / s.name
            site_dir.mkdir()
            # fsync=False: the destination's fsync is timed as part of the load (checkpoint_io)
            srv = TransferServer(s.addr, TRANSFER_PORT, token=em.token, storage_dir=site_dir, fsync=False,
                                 socket_factory=socket_factory(em.fabric.site_ns(s.name)))
            srv.start()
            self._servers[s.name] = srv

    def stop(self) -> None:
        for srv in self._servers.values():
            srv.stop()
        self._servers.clear()
        if self._dir is not None and self._em is not None:
            with critical():
                shutil.rmtree(self._dir, ignore_errors=True)
                if not self._dir.exists():
                    state.discard(self._em.fabric.plan.run_id, tmp_dirs=[str(self._dir)])
                self._dir = None

    def migrate(self, order: MigrationOrder) -> MigrationOutcome:
        from testbed.transfer.client import send
        from testbed.transfer.disk_io import load_once, load_sample, save_sample, write_file
        from testbed.transfer.source import BallastSource, FileSource

        em = self._em
        assert em is not None and self._dir is not None
        n_bytes = em.scaling.bytes_sent(order.checkpoint_gb)
        real_bytes = order.checkpoint_gb * 1e9
        chunk = min(4 << 20, max(64 << 10, n_bytes // 16))
        tid = transfer_id(order)
        src_file, dst_file = self._dir / order.src / tid, self._dir / order.dst / tid
        lag_s = order_lag(order, em.clock.now_s())
        w0 = time.perf_counter()
        save = load = None
        transfer_wall = 0.0
        try:
            save = write_file(src_file, BallastSource(n_bytes, seed=derive_seed(0, order.job_id) & 0xFFFFFFFF))
            save = save_sample(self._dir / order.src, save)
            source = FileSource(src_file)
            source.manifest(chunk)  # hashing the checkpoint is part of saving it: not of the transfer
            report = send(
                em.fabric.site_addr(order.dst), TRANSFER_PORT, source,
                transfer_id=tid, token=em.token, chunk_bytes=chunk,
                socket_factory=socket_factory(em.fabric.site_ns(order.src)), cancel=em.cancel,
            )
            transfer_wall = report.t_transfer_s + report.t_connect_s + report.t_verify_s
            ok = report.status == "completed"
            detail = (f"measured: {n_bytes} B ballast over the emulated WAN, {report.goodput_mbps:.1f} Mbit/s wall; "
                      f"reconnects {report.reconnects}")
            if ok:
                load = load_sample(self._dir / order.dst, load_once(dst_file))
                detail += (f"; save {save.bytes_per_s / 1e6:.0f} MB/s, load {load.bytes_per_s / 1e6:.0f} MB/s "
                           f"(on {save.n_bytes} B), per file {save.per_file_s * 1e3:.1f} + "
                           f"{load.per_file_s * 1e3:.1f} ms")
            else:
                detail += f"; {report.error}"
        except Exception as e:  # a broken transfer is a failed migration, recorded, never a crash
            ok, detail = False, f"transfer error: {e}"
            transfer_wall = time.perf_counter() - w0 - (save.seconds if save else 0.0)
        finally:
            remove(src_file, dst_file)
        wall = time.perf_counter() - w0
        transfer_s = em.scaling.scenario_s(transfer_wall)
        phase_wall = transfer_wall + sum(x.seconds + x.per_file_s for x in (save, load) if x is not None)
        # the per-file parts are the downtime (an empty checkpoint through the path), not in save/load
        return MigrationOutcome(
            order=order, status="completed" if ok else "failed",
            checkpoint_s=scaled_back_s(save, real_bytes, per_file=False) if save else 0.0, transfer_s=transfer_s,
            load_s=scaled_back_s(load, real_bytes, per_file=False) if load else 0.0,
            downtime_s=save.per_file_s + load.per_file_s if save and load else 0.0,
            goodput_gbps=8 * order.checkpoint_gb / transfer_s if transfer_s > 0 else 0.0, detail=detail,
            phases_measured=("checkpoint", "transfer", "load", "downtime"),
            start_lag_s=lag_s, control_wall_s=em.scaling.wall_s(lag_s) + max(0.0, wall - phase_wall),
            io_bytes=n_bytes, io_sample_bytes=save.n_bytes if save else None,
            save_bytes_per_s=save.bytes_per_s if save else None,
            load_bytes_per_s=load.bytes_per_s if load else None,
        )

    def describe(self) -> dict:
        return {
            "nodes": "ballast: seeded bytes of the checkpoint's scaled size, through the checkpoint's disk path",
            "measured": ["transfer_s (checkpoint bytes x byte_scale over the shaped WAN, connect to final ack, "
                         "x time_scale)",
                         "checkpoint_s (source: write + fsync of the scaled bytes, topped up to a sample of "
                         "at least 32 MiB; real size / measured MB/s)",
                         "load_s (destination: fsync + read back from the device, the same sample; real size / "
                         "measured MB/s)",
                         "downtime_s (the storage path's per-file overhead: an empty checkpoint saved, synced, "
                         "read back; wall seconds)", "goodput"],
            "control": "start_lag_s (scenario s between decision and the save) and control_s (wall s outside "
                       "the phases: hashing, hand-over) are recorded apart, in no phase",
            "modelled": {
                "job_progress": "node speed x power cap x time (GPU-hours)",
                "energy": "node power profile x time; renewable share from the true renewable trace",
            },
        }
