"""Solar power at a site from a physical model: pvlib clear sky times a seeded cloud process.

``power_kw = capacity_kw * GHI_clear / 1000 * performance_ratio * clearness``, clipped to
``[0, capacity_kw]``; GHI is evaluated at the *middle* of each step (so a step-hold sample
represents its step, and night is exactly 0).

* Clear-sky GHI: ``pvlib.location.Location(lat, lon, tz='UTC').get_clearsky(times,
  model='ineichen')``. Ineichen needs the Linke turbidity climatology that ships with pvlib
  (an HDF5 file read through h5py) and works offline; if that lookup fails the model falls back
  to ``'haurwitz'`` (no inputs beyond the sun's position). The model used is recorded in
  ``trace.meta['clearsky_model']``.
* Cloud cover: a latent Ornstein-Uhlenbeck process ``z`` (stationary N(0, 1), exact AR(1)
  discretisation ``z[i+1] = phi z[i] + sqrt(1 - phi^2) e``, ``phi = exp(-step_s / (cloud_corr_h
  * 3600))``) mapped to ``cover = Phi(a + z)`` in [0, 1], with ``a = sqrt(2) * Phi^-1(mean_cover)``
  so that ``E[cover] = mean_cover`` exactly (``E[Phi(a + Z)] = Phi(a / sqrt(2))``). Seeded by
  ``Generator(PCG64(cloud_seed))``.
* Kasten-Czeplak clearness: ``1 - 0.75 * cover ** 3.4``.
"""

from __future__ import annotations

import math
import warnings
from datetime import datetime

import numpy as np
import pandas as pd

from testbed.errors import TraceError
from testbed.spec.trace_sources import Solar
from testbed.traces.ar1 import ar1_standard
from testbed.traces.base import Trace
from testbed.traces.kinds import TraceContext

__all__ = ["clear_sky_ghi", "cloud_cover", "solar_noon_s", "solar_power"]


def _pvlib_quietly(fn, *args, **kwargs):
    # pvlib 0.16 calls DatetimeIndex.dayofyear, which pandas 3 deprecates (Pandas4Warning, a
    # DeprecationWarning). It is pvlib's warning, not ours: silence it here, where it arises.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"pvlib(\.|$)")
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"pvlib(\.|$)")
        return fn(*args, **kwargs)


def clear_sky_ghi(times_utc: pd.DatetimeIndex, *, lat_deg: float, lon_deg: float,
                  model: str = "ineichen") -> tuple[np.ndarray, str]:
    """Clear-sky GHI in W/m^2 at ``times_utc`` and the model actually used."""
    import pvlib  # imported here: it takes most of a scenario check's start-up when no site uses solar

    loc = pvlib.location.Location(lat_deg, lon_deg, tz="UTC")
    if model == "ineichen":
        try:
            cs = _pvlib_quietly(loc.get_clearsky, times_utc, model="ineichen")
        except (OSError, ImportError, KeyError, ValueError):
            model = "haurwitz"  # Linke turbidity lookup unavailable
        else:
            return np.clip(cs["ghi"].to_numpy(dtype=np.float64), 0.0, None), model
    cs = _pvlib_quietly(loc.get_clearsky, times_utc, model=model)
    return np.clip(cs["ghi"].to_numpy(dtype=np.float64), 0.0, None), model


def cloud_cover(n: int, *, step_s: float, seed: int, mean_cover: float, corr_h: float) -> np.ndarray:
    """Seeded cloud cover in [0, 1] (latent OU process, see the module docstring)."""
    if not 0.0 <= mean_cover <= 1.0:
        raise ValueError(f"mean_cover must be in [0, 1], got {mean_cover}")
    if not (math.isfinite(corr_h) and corr_h > 0):
        raise ValueError(f"cloud_corr_h must be > 0, got {corr_h}")
    z = ar1_standard(n, step_s=step_s, corr_s=corr_h * 3600.0,
                     rng=np.random.Generator(np.random.PCG64(seed)))
    if mean_cover in (0.0, 1.0):
        return np.full(n, float(mean_cover))
    from scipy.special import ndtr, ndtri  # imported here, like pvlib: only solar traces need them

    a = math.sqrt(2.0) * float(ndtri(mean_cover))
    return ndtr(a + z)


def solar_power(*, duration_s: float, step_s: float, start: datetime, lat_deg: float, lon_deg: float,
                capacity_kw: float, cloud_seed: int, mean_cover: float = 0.3, cloud_corr_h: float = 2.0,
                performance_ratio: float = 0.8, name: str, clearsky_model: str = "ineichen") -> Trace:
    """Solar power in kW at a site from ``start`` (timezone-aware) for ``duration_s``."""
    if start.tzinfo is None or start.utcoffset() is None:
        raise TraceError(name, "start must be a timezone-aware datetime")
    for key, value in (("duration_s", duration_s), ("step_s", step_s), ("capacity_kw", capacity_kw)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: {key} must be > 0, got {value}")
    if not (-90.0 <= lat_deg <= 90.0 and -180.0 <= lon_deg <= 360.0):
        raise ValueError(f"{name}: lat/lon out of range: ({lat_deg}, {lon_deg})")
    if not 0.0 < performance_ratio <= 1.0:
        raise ValueError(f"{name}: performance_ratio must be in (0, 1], got {performance_ratio}")
    n = max(1, math.ceil(duration_s / step_s - 1e-9))
    t = step_s * np.arange(n, dtype=np.float64)
    mid = np.minimum(t + step_s / 2.0, (t + float(duration_s)) / 2.0)  # last step may be short
    start_utc = pd.Timestamp(start).tz_convert("UTC")
    times = pd.DatetimeIndex(start_utc + pd.to_timedelta(mid, unit="s"))
    ghi, model = clear_sky_ghi(times, lat_deg=lat_deg, lon_deg=lon_deg, model=clearsky_model)
    cover = cloud_cover(n, step_s=step_s, seed=cloud_seed, mean_cover=mean_cover, corr_h=cloud_corr_h)
    clearness = 1.0 - 0.75 * cover ** 3.4
    power = np.clip(capacity_kw * ghi / 1000.0 * performance_ratio * clearness, 0.0, capacity_kw)
    meta = {
        "generator": "solar_power", "clearsky_model": model, "lat_deg": lat_deg, "lon_deg": lon_deg,
        "cloud_seed": cloud_seed, "mean_cover": mean_cover, "cloud_corr_h": cloud_corr_h,
        "performance_ratio": performance_ratio, "start": start.isoformat(),
    }
    return Trace(t, power, unit="kW", name=name, end_s=float(duration_s), meta=meta)


def solar_noon_s(start: datetime, lon_deg: float, day: int = 0) -> float:
    """Approximate scenario time of solar noon on UTC day ``day`` after ``start``'s UTC date
    (mean solar time: ignores the equation of time, which moves it by up to +-16 min)."""
    start_utc = pd.Timestamp(start).tz_convert("UTC")
    noon = start_utc.normalize() + pd.Timedelta(days=day, hours=12.0 - lon_deg / 15.0)
    return float((noon - start_utc).total_seconds())


def build(src: Solar, ctx: TraceContext) -> Trace:
    """The trace of a ``kind: solar`` source (its registry entry: :class:`testbed.spec.trace_sources.Solar`)."""
    site = ctx.site
    return solar_power(
        duration_s=ctx.horizon_s, step_s=ctx.step_s, start=ctx.scenario.start, lat_deg=site.lat_deg,
        lon_deg=site.lon_deg, capacity_kw=src.capacity_kw,
        cloud_seed=ctx.sub_seed(src.clouds.seed, "clouds", ctx.site_name), mean_cover=src.clouds.mean_cover,
        cloud_corr_h=src.clouds.corr_h, performance_ratio=src.performance_ratio, name=ctx.name,
    )
