"""Great-circle distance and the fibre latency model used when a link gives no latency."""

from __future__ import annotations

import math

EARTH_RADIUS_KM = 6371.0088
FIBRE_US_PER_KM = 5.0  # light in glass: ~2/3 c
ROUTE_FACTOR = 1.5  # fibre routes are longer than the great circle
BASE_LATENCY_MS = 0.5  # switching/serialisation at both ends


def great_circle_km(lat1_deg: float, lon1_deg: float, lat2_deg: float, lon2_deg: float) -> float:
    p1, p2 = math.radians(lat1_deg), math.radians(lat2_deg)
    dp, dl = p2 - p1, math.radians(lon2_deg - lon1_deg)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def fibre_latency_ms(distance_km: float, route_factor: float = ROUTE_FACTOR, base_ms: float = BASE_LATENCY_MS) -> float:
    """One-way latency: base + distance * route factor * 5 us/km."""
    return base_ms + distance_km * route_factor * FIBRE_US_PER_KM / 1000.0
