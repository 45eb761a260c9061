"""Solar power from pvlib clear sky and a seeded cloud process."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from testbed.errors import TraceError
from testbed.traces import solar_power
from testbed.traces.solar import cloud_cover, solar_noon_s

DAY = 86400.0

SITES = [  # (name, lat, lon, tz)
    ("san-jose", 37.34, -121.89, "America/Los_Angeles"),
    ("madrid", 40.42, -3.70, "Europe/Madrid"),
    ("sydney", -33.87, 151.21, "Australia/Sydney"),
]


def make(lat=37.34, lon=-121.89, tz="America/Los_Angeles", seed=1, days=3, **kw):
    start = datetime(2024, 6, 1, tzinfo=ZoneInfo(tz))
    args = dict(duration_s=days * DAY, step_s=300.0, start=start, lat_deg=lat, lon_deg=lon,
                capacity_kw=250.0, cloud_seed=seed, name="pv")
    args.update(kw)
    return solar_power(**args)


def test_clear_sky_model_is_ineichen_offline():
    tr = make()
    assert tr.meta["clearsky_model"] == "ineichen"
    assert tr.unit == "kW" and tr.end_s == 3 * DAY and len(tr) == 3 * 288


def test_haurwitz_can_be_chosen():
    assert make(clearsky_model="haurwitz").meta["clearsky_model"] == "haurwitz"


@pytest.mark.parametrize(("name", "lat", "lon", "tz"), SITES)
def test_zero_at_night_peak_near_solar_noon_never_above_capacity(name, lat, lon, tz):
    tr = make(lat, lon, tz, mean_cover=0.0)
    start = datetime(2024, 6, 1, tzinfo=ZoneInfo(tz))
    assert tr.values.min() == 0.0 and tr.values.max() <= 250.0
    noons = [solar_noon_s(start, lon, d) for d in range(-1, 4)]
    noons = [n for n in noons if 12 * 3600 <= n <= tr.end_s - 12 * 3600]  # whole days inside
    assert len(noons) == 2
    for noon in noons:
        assert tr.at(noon - 9 * 3600) == 0.0  # before sunrise at these latitudes in June
        assert tr.at(noon + 11.5 * 3600) == 0.0  # middle of the night
        window = tr.sliced(noon - 6 * 3600, noon + 6 * 3600)
        t_peak = window.times_s[np.argmax(window.values)] + 150.0  # mid-step
        assert abs(t_peak - noon) < 25 * 60  # equation of time is at most ~16 min
        assert window.values.max() > 0.3 * 250.0  # even in the southern winter


def test_clouds_reduce_energy_and_capacity_bounds_hold_for_huge_ratio():
    clear = make(mean_cover=0.0)
    cloudy = make(mean_cover=0.8)
    assert cloudy.integrate(0, cloudy.end_s) < clear.integrate(0, clear.end_s)
    capped = make(mean_cover=0.0, performance_ratio=1.0, capacity_kw=1.0)
    assert capped.values.max() <= 1.0


def test_reproducible_from_cloud_seed():
    assert make(seed=4) == make(seed=4)
    assert make(seed=4) != make(seed=5)


def test_cloud_cover_mean_and_range():
    cover = cloud_cover(200_000, step_s=300.0, seed=3, mean_cover=0.3, corr_h=2.0)
    assert cover.min() >= 0.0 and cover.max() <= 1.0
    assert cover.mean() == pytest.approx(0.3, abs=0.03)
    lag = int(2 * 3600 / 300)  # one correlation time
    z = cover - cover.mean()
    rho = float(np.dot(z[:-lag], z[lag:]) / np.dot(z, z))
    assert 0.2 < rho < 0.6  # correlated over about cloud_corr_h
    assert np.all(cloud_cover(10, step_s=300.0, seed=3, mean_cover=0.0, corr_h=2.0) == 0.0)


def test_invalid_inputs():
    with pytest.raises(TraceError, match="timezone-aware"):
        make(start=datetime(2024, 6, 1))
    with pytest.raises(ValueError, match="capacity_kw"):
        make(capacity_kw=0.0)
    with pytest.raises(ValueError, match="lat/lon"):
        make(lat=95.0)
    with pytest.raises(ValueError, match="mean_cover"):
        make(mean_cover=1.5)


def test_start_in_utc_matches_same_instant_in_local_time():
    local = make()
    utc = make(start=datetime(2024, 6, 1, 7, tzinfo=timezone.utc))
    np.testing.assert_allclose(local.values, utc.values)
