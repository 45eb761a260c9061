"""A migration's I/O phases as a function of the checkpoint's size: the sim substrate's truth.

Each phase takes ``fixed_s + size_gb x s_per_gb`` seconds on average (never less than 0), times a
lognormal factor of mean 1 and relative standard deviation ``rel_sd`` (0: deterministic)::

    checkpoint_s  torch.save + fsync at the source        fit of the calibration's ``save`` points
    load_s        torch.load of a cold file at the dest.  fit of the calibration's ``load_cold`` points
    downtime_s    pause-to-resume overhead                the scenario's ``substrate.t_downtime_s``

The lines and spreads come from a calibration file, the JSON that ``testbed calibrate load``
writes (:mod:`testbed.load_calibration`): its raw points are refitted here by least squares
(:func:`testbed.stats.line_fit`), and ``rel_sd`` is the relative residual standard deviation of
those points around the fit (:func:`relative_residual_sd`), never a chosen number. The
calibration has no downtime operation: nothing measured here says how long pausing and restarting
a job takes, so downtime stays the scenario's constant (``downtime_s`` of :func:`from_calibration`),
deterministic, and every description says so.

``default_io_model`` reads the calibration shipped with testbed (``testbed/data/io-model.json``:
points, fits with 95 % CIs, the command, date, machine and torch version that produced it). The
calibrated sizes are far below a real checkpoint's (tens to hundreds of GB): the model extrapolates
the per-GB part, which dominates there.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.bounded_read import read_bounded
from testbed.errors import SpecError

if TYPE_CHECKING:
    import numpy as np

# numpy and scipy (testbed.stats) are imported where a model is fitted or drawn, not with this module:
# the scenario schema names its values, and a bad scenario is refused before numpy is imported

MEASURED = "measured"
"""``substrate.io_model`` value: the shipped calibration (:func:`default_io_model`)."""
CONSTANT = "constant"
"""``substrate.io_model`` value: no model: ``t_load_s`` / ``t_downtime_s`` constants, no checkpoint write."""

FORMAT = "testbed-load-calibration/1"
CHECKPOINT_OP, LOAD_OP = "save", "load_cold"
SHIPPED = "data/io-model.json"  # inside the testbed package
MAX_FILE_BYTES = 4 << 20
MAX_POINTS = 100_000
_MAX_NOTE_CHARS = 300  # provenance strings of the file shown in descriptions (longer ones are left out)


class IoModelError(SpecError):
    """A calibration file cannot serve as an I/O model. Names the file (and the field of the
    scenario that named it, where there is one), never quotes its content."""

    def __init__(self, where: str, message: str):
        super().__init__([(where, message)])
        self.where, self.message = where, message

    def __reduce__(self):  # crosses process boundaries (sweep workers) intact
        return IoModelError, (self.where, self.message)


@dataclass(frozen=True)
class PhaseModel:
    """One phase: ``max(0, fixed_s + size_gb x s_per_gb)`` seconds on average, times a lognormal
    factor of mean 1 and relative s.d. ``rel_sd``. ``basis`` says where the numbers come from."""

    fixed_s: float
    s_per_gb: float
    rel_sd: float = 0.0
    basis: str = ""

    def __post_init__(self):
        if not all(math.isfinite(x) for x in (self.fixed_s, self.s_per_gb, self.rel_sd)):
            raise ValueError("a phase model's numbers must be finite")
        if self.rel_sd < 0:
            raise ValueError("rel_sd must be >= 0")

    @property
    def sigma(self) -> float:
        """The s.d. of the factor's logarithm (a lognormal of mean 1 and s.d. ``rel_sd``)."""
        return math.sqrt(math.log1p(self.rel_sd ** 2))

    def mean_s(self, size_gb: float) -> float:
        return max(0.0, self.fixed_s + size_gb * self.s_per_gb)

    def seconds(self, size_gb: float, z: float) -> float:
        """The phase's duration for the standard normal draw ``z`` (``z`` is ignored at rel_sd 0)."""
        s = self.sigma
        return self.mean_s(size_gb) * math.exp(s * z - s * s / 2.0)


@dataclass(frozen=True)
class IoModel:
    """The three I/O phases of a migration. ``source`` names the file the model was read from
    (and its SHA-256); ``provenance`` what that file says about how it was measured."""

    checkpoint: PhaseModel
    load: PhaseModel
    downtime: PhaseModel
    source: str = ""
    provenance: str = ""

    def draw(self, size_gb: float, rng: np.random.Generator) -> tuple[float, float, float]:
        """(checkpoint_s, load_s, downtime_s) of one migration of a ``size_gb`` checkpoint. Always
        takes three standard normals from ``rng`` (in that order), whatever the spreads."""
        z = rng.standard_normal(3)
        return (self.checkpoint.seconds(size_gb, float(z[0])), self.load.seconds(size_gb, float(z[1])),
                self.downtime.seconds(size_gb, float(z[2])))

    def mean(self, size_gb: float) -> tuple[float, float, float]:
        """The mean (checkpoint_s, load_s, downtime_s) of :meth:`draw` for a ``size_gb`` checkpoint."""
        return self.checkpoint.mean_s(size_gb), self.load.mean_s(size_gb), self.downtime.mean_s(size_gb)

    def describe(self) -> dict[str, str]:
        """Where each phase comes from, for the run's manifest."""
        src = f" of {self.source}" if self.source else ""
        prov = f" ({self.provenance})" if self.provenance else ""
        return {"checkpoint_s": f"{_phase_text(self.checkpoint)}{src}{prov}",
                "load_s": f"{_phase_text(self.load)}{src}",
                "downtime_s": _phase_text(self.downtime)}


def _phase_text(p: PhaseModel) -> str:
    spread = f" x lognormal factor (mean 1, relative s.d. {p.rel_sd:.3f})" if p.rel_sd > 0 else " (deterministic)"
    return f"{p.fixed_s:.4g} s + S x {p.s_per_gb:.4g} s/GB{spread}: {p.basis}"


def relative_residual_sd(size_gb, seconds, fixed_s: float, s_per_gb: float) -> float:
    """The points' relative residual s.d. around the line ``fixed_s + size_gb x s_per_gb``:
    ``sqrt(sum (y - fit)^2 / sum fit^2 x n / (n - 2))``, the residuals' root mean square over the
    fitted values' (the fit's two degrees of freedom taken off). Under a multiplicative spread of
    constant relative s.d. ``c`` it estimates ``c``, and unlike the mean of ``((y - fit) / fit)^2``
    it stays finite where the fit is near 0 (small sizes, a negative intercept); the large sizes,
    which the model extrapolates from, weigh most. NaN with fewer than 3 points."""
    import numpy as np

    x, y = np.asarray(size_gb, dtype=float), np.asarray(seconds, dtype=float)
    fit = fixed_s + s_per_gb * x
    n = x.size
    scale = float(fit @ fit)
    if n < 3 or scale <= 0:
        return float("nan")
    r = y - fit
    return float(math.sqrt(float(r @ r) / scale * n / (n - 2)))


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _points(data: dict, where: str) -> dict[str, tuple[list[float], list[float]]]:
    """Each operation's (sizes GB, seconds) from the file's ``points``; IoModelError naming the
    first bad entry by index, never quoting it."""
    points = data.get("points")
    if not isinstance(points, list) or not points:
        raise IoModelError(where, "points: must be a non-empty list (testbed calibrate load writes them)")
    if len(points) > MAX_POINTS:
        raise IoModelError(where, f"points: more than {MAX_POINTS}")
    out: dict[str, tuple[list[float], list[float]]] = {}
    for i, p in enumerate(points):
        if not isinstance(p, dict):
            raise IoModelError(where, f"points[{i}]: must be a mapping with op, size_bytes and seconds")
        op = p.get("op")
        if not isinstance(op, str):
            raise IoModelError(where, f"points[{i}].op: must be a string")
        if not (_number(p.get("size_bytes")) and p["size_bytes"] > 0):
            raise IoModelError(where, f"points[{i}].size_bytes: must be a finite number > 0")
        if not (_number(p.get("seconds")) and p["seconds"] >= 0):
            raise IoModelError(where, f"points[{i}].seconds: must be a finite number >= 0")
        xs, ys = out.setdefault(op, ([], []))
        xs.append(p["size_bytes"] / 1e9)
        ys.append(float(p["seconds"]))
    return out


def _fit_phase(op: str, xs: list[float], ys: list[float], data: dict, where: str) -> PhaseModel:
    if len(xs) < 3 or len(set(xs)) < 2:
        raise IoModelError(where, f"points: operation {op!r} needs at least 3 points over at least 2 sizes")
    from testbed.stats import line_fit

    f = line_fit(xs, ys)
    recorded = (data.get("fits") or {}).get(op) if isinstance(data.get("fits"), dict) else None
    if isinstance(recorded, dict):
        for key, value in (("fixed_s", f.intercept), ("s_per_gb", f.slope)):
            r = recorded.get(key)
            if not _number(r) or not math.isclose(r, value, rel_tol=1e-6, abs_tol=1e-9):
                raise IoModelError(where, f"fits.{op}.{key}: does not match the fit of its points (edited?)")
    if f.slope <= 0:
        raise IoModelError(where, f"fits.{op}: bigger checkpoints did not take longer (s_per_gb <= 0); "
                                  "calibrate again over sizes farther apart")
    rel_sd = relative_residual_sd(xs, ys, f.intercept, f.slope)
    if isinstance(recorded, dict) and "rel_sd" in recorded and not (
            _number(recorded["rel_sd"]) and math.isclose(recorded["rel_sd"], rel_sd, rel_tol=1e-6, abs_tol=1e-9)):
        raise IoModelError(where, f"fits.{op}.rel_sd: does not match the spread of its points (edited?)")
    lo_gb, hi_gb = min(xs), max(xs)
    basis = (f"least-squares fit of {f.n} '{op}' points at {lo_gb:.3g}-{hi_gb:.3g} GB "
             f"(fixed 95 % CI [{f.intercept_ci[0]:.3g}, {f.intercept_ci[1]:.3g}] s, per GB "
             f"[{f.slope_ci[0]:.3g}, {f.slope_ci[1]:.3g}] s, R2 {f.r2:.3f}; "
             "s.d.: relative residual s.d. of those points)")
    return PhaseModel(f.intercept, f.slope, rel_sd, basis)


def _provenance(data: dict) -> str:
    parts = []
    for key, label in (("date_utc", "measured"), ("command", "by"), ("torch", "torch")):
        v = data.get(key)
        if isinstance(v, str) and 0 < len(v) <= _MAX_NOTE_CHARS:
            parts.append(f"{label} {v}")
    machine = data.get("machine")
    if isinstance(machine, dict):
        desc = machine.get("cpu"), machine.get("platform")
        text = ", ".join(x for x in desc if isinstance(x, str) and 0 < len(x) <= _MAX_NOTE_CHARS)
        if text:
            parts.append(f"on {text}")
    return "; ".join(parts)


def from_calibration(data: object, *, downtime_s: float, where: str = "calibration") -> IoModel:
    """An I/O model from a ``testbed calibrate load`` record (the parsed JSON): checkpoint from
    the ``save`` points, load from the ``load_cold`` points, each a line refitted to the points
    with the relative residual s.d. as its spread; downtime is ``downtime_s`` (the calibration
    measures none), deterministic. Fits the file records must match its points. IoModelError
    (naming ``where``) when the record cannot serve."""
    if not isinstance(data, dict):
        raise IoModelError(where, "must be a JSON object written by testbed calibrate load")
    if data.get("format") != FORMAT:
        raise IoModelError(where, f"format: must be {FORMAT!r} (a file written by testbed calibrate load)")
    if not (_number(downtime_s) and downtime_s >= 0):
        raise ValueError("downtime_s must be a finite number >= 0")
    by_op = _points(data, where)
    phases = {}
    for op in (CHECKPOINT_OP, LOAD_OP):
        if op not in by_op:
            raise IoModelError(where, f"points: no {op!r} points (testbed calibrate load writes them)")
        phases[op] = _fit_phase(op, *by_op[op], data, where)
    downtime = PhaseModel(float(downtime_s), 0.0, 0.0,
                          "the scenario's substrate.t_downtime_s (constant: the calibration measures no downtime)")
    return IoModel(phases[CHECKPOINT_OP], phases[LOAD_OP], downtime, provenance=_provenance(data))


def _parse(raw: bytes, where: str) -> object:
    if len(raw) > MAX_FILE_BYTES:
        raise IoModelError(where, f"is over the {MAX_FILE_BYTES >> 20} MB limit of a calibration file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise IoModelError(where, f"is not UTF-8 text (byte {e.start + 1})") from None
    if not text.strip():
        raise IoModelError(where, "is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise IoModelError(where, f"is not valid JSON (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise IoModelError(where, "is not valid JSON (nested too deeply)") from None


def io_model_from_bytes(raw: bytes, *, downtime_s: float, where: str, name: str) -> IoModel:
    """The model of a calibration file's bytes; ``name`` is what descriptions call the file."""
    model = from_calibration(_parse(raw, where), downtime_s=downtime_s, where=where)
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return IoModel(model.checkpoint, model.load, model.downtime, f"{name} (sha256 {digest})", model.provenance)


def load_io_model(path: str | Path, *, downtime_s: float) -> IoModel:
    """The model of a calibration file (``testbed calibrate load --out PATH``). IoModelError naming
    the file when it cannot be read or cannot serve; its content is never quoted."""
    path = Path(path)
    raw = read_bounded(path, MAX_FILE_BYTES, "a calibration file", IoModelError)
    return io_model_from_bytes(raw, downtime_s=downtime_s, where=str(path), name=str(path.resolve()))


def default_io_model(*, downtime_s: float) -> IoModel:
    """The calibration shipped with testbed (``testbed/data/io-model.json``)."""
    res = resources.files("testbed").joinpath(SHIPPED)
    where = f"testbed/{SHIPPED}"
    if not res.is_file():
        raise IoModelError(where, "the shipped calibration is missing from this installation")
    return io_model_from_bytes(res.read_bytes(), downtime_s=downtime_s, where=where, name=where)
