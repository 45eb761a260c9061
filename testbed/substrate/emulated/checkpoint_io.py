"""A migration's checkpoint I/O on an emulated site, measured and scaled back to the real size.

The emulation moves ``S x byte_scale`` bytes; disks are not scaled, so a phase measured on the
scaled bytes gives a throughput (bytes per wall second), and the phase's time for the real
checkpoint of ``S`` bytes is its per-file part plus ``S / throughput``. The throughput is measured
on at least ``SAMPLE_MIN_BYTES`` and the per-file part on an empty file, at the same moment
(:func:`testbed.transfer.disk_io.save_sample`, ``load_sample``): a few MB scaled back 1000x would
otherwise scale the disk's jitter and its per-``fsync`` cost 1000x. Neither the emulation's
``time_scale`` nor the control plane enters these times.

- save (source, before sending): write the checkpoint to a file and ``fsync`` it (and its directory);
- load (destination, after the last byte arrived): ``fsync`` the received file, evict it from the
  page cache, read it back (with agents, and deserialise the real checkpoint: ``torch.load``).
"""

from __future__ import annotations

import os
from pathlib import Path

from testbed.transfer.disk_io import IoTiming


def scaled_back_s(timing: IoTiming, real_bytes: float, *, per_file: bool = True) -> float:
    """The real checkpoint's time for a phase measured on its scaled bytes: its per-file part (unless
    that is filed elsewhere: ``per_file=False``) plus its bytes at the measured throughput."""
    if timing.n_bytes <= 0:  # nothing to scale (an empty checkpoint): the time as measured
        return timing.seconds
    return timing.seconds_for(real_bytes) if per_file else timing.bytes_s(real_bytes)


def remove(*paths: str | os.PathLike | None) -> None:
    for p in paths:
        if p is not None:
            Path(p).unlink(missing_ok=True)
