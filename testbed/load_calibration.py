"""Measure how long a checkpoint takes to save and to load on this machine, to calibrate Eq. 1's T_load.

The paper charges every migration a constant ``T_load = 10.3 s`` whatever the checkpoint's size. Here
a checkpoint of ``size`` bytes is a state_dict of float32 tensors (a model's layers), and:

- **save**: ``torch.save`` to a file in ``directory``, then ``fsync`` (what a checkpoint costs the
  source before it can be sent);
- **load, cold**: the file's pages are dropped from the page cache (``posix_fadvise(DONTNEED)`` on
  that file only; nothing else on the machine is touched), then ``torch.load`` onto ``device``
  (with CUDA, the copy to the GPU is synchronised): what a destination pays for a checkpoint that
  just arrived on its disk;
- **load, warm**: the same with the file still in the page cache (the best case).

Each is timed at several sizes and repeated; a least-squares line ``t = fixed_s + size_gb x
s_per_gb`` per operation, with 95 % confidence intervals, turns the points into a model that
extrapolates to a family's real checkpoint size: ``T_load(S) = fixed_s + S x s_per_gb``. Each fit
also records the spread of the points around it: ``rel_sd``, the relative residual s.d.
(:func:`testbed.io_model.relative_residual_sd`), overall and per size. The record says how it was
made (command, UTC date, machine, torch version, sizes, repeats): :func:`testbed.io_model.from_calibration`
turns it into the sim substrate's I/O truth (``substrate.io_model`` of a scenario).
"""

from __future__ import annotations

import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from testbed.io_model import FORMAT, relative_residual_sd
from testbed.stats import line_fit
from testbed.transfer.disk_io import drop_cache

OPS = ("save", "load_cold", "load_warm")
TENSOR_MB = 16  # tensors of at most this size make up a checkpoint (a model's layers)


@dataclass(frozen=True)
class LinearFit:
    """``t = fixed_s + size_gb x s_per_gb`` with 95 % CIs (ordinary least squares); ``rel_sd``: the
    relative residual s.d. of the points around it (:func:`testbed.io_model.relative_residual_sd`),
    ``rel_sd_by_size_gb``: the root mean square of ``(y - fit) / fit`` at each measured size where the
    fit is > 0 (does the spread grow with the size?)."""

    fixed_s: float
    s_per_gb: float
    fixed_ci95: tuple[float, float]
    s_per_gb_ci95: tuple[float, float]
    r2: float
    n: int
    rel_sd: float = float("nan")
    rel_sd_by_size_gb: dict[str, float] = field(default_factory=dict)

    @property
    def gb_per_s(self) -> float:
        """Throughput of the per-byte part (inf if the fit found no size dependence)."""
        return 1.0 / self.s_per_gb if self.s_per_gb > 0 else float("inf")

    def seconds(self, size_gb: float) -> float:
        return self.fixed_s + size_gb * self.s_per_gb


def fit_line(size_gb: list[float], seconds: list[float]) -> LinearFit:
    """Least squares with 95 % t-intervals (:func:`testbed.stats.line_fit`); needs at least 3 points
    over at least 2 sizes."""
    if len(size_gb) < 3 or len(set(size_gb)) < 2:
        raise ValueError("a line needs at least 3 points over at least 2 sizes")
    f = line_fit(size_gb, seconds)
    rel_sd = relative_residual_sd(size_gb, seconds, f.intercept, f.slope)
    by_size = {}
    for size in sorted(set(size_gb)):
        ys = [y for x, y in zip(size_gb, seconds) if x == size]
        fit = f.intercept + f.slope * size
        if fit > 0:
            by_size[f"{size:.6g}"] = math.sqrt(sum(((y - fit) / fit) ** 2 for y in ys) / len(ys))
    return LinearFit(f.intercept, f.slope, f.intercept_ci, f.slope_ci, f.r2, f.n, rel_sd, by_size)


def machine() -> dict:
    """What the timings were measured on (best effort: a field this system does not tell is left out)."""
    out: dict = {"hostname": platform.node(), "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    out["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        out["memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return out


def filesystem_of(directory: Path) -> str | None:
    """The file system type ``directory`` is on (/proc/mounts: its longest mount point), or None."""
    try:
        real = str(Path(directory).resolve())
        best, kind = "", None
        with open("/proc/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")) \
                        and len(parts[1]) > len(best):
                    best, kind = parts[1], parts[2]
        return kind
    except OSError:
        return None


@dataclass
class LoadCalibration:
    device: str
    directory: str
    torch_version: str
    points: list[dict] = field(default_factory=list)  # {op, size_bytes, seconds, repeat}
    fits: dict[str, LinearFit] = field(default_factory=dict)
    sizes_mb: list[float] = field(default_factory=list)
    repeats: int = 0
    date_utc: str = ""
    machine: dict = field(default_factory=dict)
    filesystem: str | None = None
    command: str = ""  # the command line that made it (the CLI fills it in)

    def t_load_s(self, size_gb: float, *, cold: bool = True) -> float:
        return self.fits["load_cold" if cold else "load_warm"].seconds(size_gb)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "command": self.command, "date_utc": self.date_utc, "machine": self.machine,
                "device": self.device, "directory": self.directory, "filesystem": self.filesystem,
                "torch": self.torch_version, "sizes_mb": self.sizes_mb, "repeats": self.repeats,
                "points": self.points,
                "fits": {op: {**asdict(f), "gb_per_s": f.gb_per_s} for op, f in self.fits.items()}}


def _state_dict(size_bytes: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    per = TENSOR_MB << 20
    out, left, i = {}, size_bytes, 0
    while left > 0:
        n = max(1, min(per, left) // 4)
        out[f"layer{i}.weight"] = torch.randn(n, generator=g)
        left -= 4 * n
        i += 1
    return out



def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def measure(sizes_mb: list[float], *, repeats: int = 3, device: str = "cpu", directory: Path,
            progress=None) -> LoadCalibration:
    """Time save / cold load / warm load at each size, ``repeats`` times; fit one line per operation.
    The files live in ``directory`` (created and emptied by the caller) and are removed as they go."""
    import torch

    cal = LoadCalibration(device, str(directory), torch.__version__, sizes_mb=list(sizes_mb), repeats=repeats,
                          date_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), machine=machine(),
                          filesystem=filesystem_of(directory))
    for size_mb in sizes_mb:
        size = int(size_mb * (1 << 20))
        for r in range(repeats):
            sd = _state_dict(size, seed=r)
            path = directory / f"ckpt-{size}-{r}.pt"
            t0 = time.perf_counter()
            with open(path, "wb") as f:
                torch.save(sd, f)
                f.flush()
                os.fsync(f.fileno())
            save_s = time.perf_counter() - t0
            del sd
            real = path.stat().st_size
            for op, cold in (("load_cold", True), ("load_warm", False)):
                if cold:
                    drop_cache(path)
                t0 = time.perf_counter()
                loaded = torch.load(path, map_location=device, weights_only=True)
                _sync(device)
                dt = time.perf_counter() - t0
                if sum(v.numel() * v.element_size() for v in loaded.values()) < size - 4:
                    raise RuntimeError(f"{path}: read back fewer bytes than were saved")
                del loaded
                cal.points.append({"op": op, "size_bytes": real, "seconds": dt, "repeat": r})
            cal.points.append({"op": "save", "size_bytes": real, "seconds": save_s, "repeat": r})
            path.unlink()
            if progress is not None:
                progress(size_mb, r)
    for op in OPS:
        pts = [p for p in cal.points if p["op"] == op]
        cal.fits[op] = fit_line([p["size_bytes"] / 1e9 for p in pts], [p["seconds"] for p in pts])
    return cal
