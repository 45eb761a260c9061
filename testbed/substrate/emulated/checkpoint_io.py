"""A migration's checkpoint I/O on an emulated site, measured and scaled back to the real size.

The emulation moves ``S x byte_scale`` bytes; disks are not scaled, so a phase measured on the
scaled bytes gives a throughput (bytes per wall second), and the phase's time for the real
checkpoint of ``S`` bytes is ``S / throughput`` (plus a measured fixed overhead where one is
meaningful). Neither the emulation's ``time_scale`` nor the control plane enters these times.

- save (source, before sending): write the checkpoint to a file and ``fsync`` it;
- load (destination, after the last byte arrived): ``fsync`` the received file, evict it from the
  page cache, read it back (with agents, and deserialise the real checkpoint: ``torch.load``);
- fixed overhead (ballast): one empty checkpoint saved, made durable and read back -- the
  per-migration cost of the storage path that does not grow with the bytes (file creation,
  metadata and directory ``fsync``s).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from testbed.transfer.disk_io import IoTiming, persist, read_back, write_file
from testbed.transfer.source import BallastSource


def fixed_overhead(directory: Path, name: str) -> IoTiming:
    """The storage path's fixed cost: an empty file written, synced, made durable, read back, removed."""
    path = Path(directory) / f".{name}.probe"
    t0 = time.perf_counter()
    try:
        write_file(path, BallastSource(0))
        persist(path)
        read_back(path)
    finally:
        path.unlink(missing_ok=True)
    return IoTiming(0, time.perf_counter() - t0)


def scaled_back_s(timing: IoTiming, real_bytes: float) -> float:
    """The real checkpoint's time for a phase measured on its scaled bytes."""
    if timing.n_bytes <= 0:
        return timing.seconds
    return timing.seconds_for(real_bytes)


def remove(*paths: str | os.PathLike | None) -> None:
    for p in paths:
        if p is not None:
            Path(p).unlink(missing_ok=True)
