"""Where a scenario's traces come from: generators (seeded) or files in the real formats."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from testbed.registry import Registry
from testbed.spec.topology import FloatPair, Strict
from testbed.spec.union import RegistryUnion, rebuild_on_change, register_model

RENEWABLE_SOURCE_SPECS: Registry[type[Strict]] = Registry("trace kind")
"""Renewable trace kinds by ``kind``; a new one registers its model with ``@renewable_source`` (and its
builder in ``testbed.traces.kinds``)."""


def renewable_source(model: type[Strict]) -> type[Strict]:
    """Class decorator: register a renewable trace source model (a ``Strict`` model with ``kind: Literal[...]``)."""
    return register_model(RENEWABLE_SOURCE_SPECS, "kind", model)


@renewable_source
class CurtailmentWindows(Strict):
    """Seeded synthetic renewable-surplus windows (CAISO-calibrated by default: mean 2.5 h)."""

    kind: Literal["curtailment_windows"]
    capacity_kw: float = Field(gt=0, description="Surplus power inside a window (upper end).")
    mean_window_h: float = Field(2.5, gt=0, le=24)
    windows_per_day: float = Field(1.6, ge=0, le=24)
    base_frac: float = Field(0.0, ge=0, lt=0.5, description="Renewable power outside windows, as a fraction of capacity (below the windows' 0.5 floor).")
    offset_h: Annotated[float, Field(ge=-24, le=24)] | Literal["auto"] = Field(
        "auto", description="Extra shift of the window centres, h (within +-24); auto = centred on the site's solar noon."
    )
    overlap: Literal["separate", "merge"] = Field(
        "separate", description="separate: a window drawn over the previous one starts 0.5 h after it "
        "(count and mean length match the parameters); merge: overlapping windows merge (fewer, longer)."
    )
    seed: int | None = Field(None, description="Default: derived from the scenario seed and the site name.")


class CloudModel(Strict):
    seed: int | None = None
    mean_cover: float = Field(0.3, ge=0, le=1)
    corr_h: float = Field(2.0, gt=0)


@renewable_source
class Solar(Strict):
    """PV power from pvlib clear-sky irradiance at the site's location times a seeded cloud process."""

    kind: Literal["solar"]
    capacity_kw: float = Field(gt=0)
    performance_ratio: float = Field(0.8, gt=0, le=1)
    clouds: CloudModel = CloudModel()


@renewable_source
class Caiso(Strict):
    """CAISO 'Production and Curtailments' workbook (.xlsx) or the same table as CSV."""

    kind: Literal["caiso"]
    file: str
    column: str = Field("solar_curtailment", description="solar_curtailment | wind_curtailment | total_curtailment | production:<Column>")
    scale_to_kw: float = Field(
        gt=0, description="Required: the kW that the series' maximum over the scenario window maps to (CAISO "
        "data are grid-scale MW; read unscaled, a curtailment series would feed a site hundreds of MW).")


@renewable_source
class GooglePower(Strict):
    """Google 2019 power-trace CSV (measured_power_util / production_power_util, 5-minute)."""

    kind: Literal["google"]
    file: str
    column: Literal["measured_power_util", "production_power_util"] = "measured_power_util"
    cell: str | None = None
    pdu: str | None = None
    capacity_kw: float = Field(gt=0)
    mode: Literal["available", "utilisation"] = "available"
    align: Literal["day", "week", "trace_start"] = Field(
        "day", description="What scenario t=0 replays: the trace instant with the same US Pacific time of day "
        "as start (day), the same weekday and time of day (week), or the trace start 2019-05-01 00:00 PT (trace_start).")
    offset_h: float = Field(0.0, ge=-24 * 366, le=24 * 366, description="Hours added after the alignment (any sign).")


@renewable_source
class GoogleSynthetic(Strict):
    """Seeded synthetic Google-2019-like PDU utilisation per site (testbed/traces/google_synthetic.py)."""

    kind: Literal["google_synthetic"]
    capacity_kw: float | None = Field(None, gt=0, description="Site power capacity (kW); or capacity_per_active.")
    capacity_per_active: float | None = Field(
        None, gt=0, description="Site capacity as a multiple of its nodes' full active power (nodes x p_active_kw).")
    mode: Literal["available", "utilisation"] = "available"
    mean_util: FloatPair = Field((0.45, 0.75), description="Range of the per-site mean utilisation.")
    diurnal_amp: float = Field(0.05, ge=0, le=0.5)
    peak_h: float = Field(15.0, ge=0, lt=24, description="Local hour of the utilisation peak.")
    noise_sd: float = Field(0.04, ge=0, le=0.5)
    corr_h: float = Field(2.0, gt=0)
    seed: int | None = None

    @model_validator(mode="after")
    def _one_capacity(self) -> "GoogleSynthetic":
        if (self.capacity_kw is None) == (self.capacity_per_active is None):
            raise ValueError("give exactly one of capacity_kw and capacity_per_active")
        lo, hi = self.mean_util
        if not 0 <= lo <= hi <= 1:
            raise ValueError("mean_util must satisfy 0 <= low <= high <= 1")
        return self


@renewable_source
class CsvSeries(Strict):
    """Plain ``timestamp,value`` CSV (seconds from scenario start, or ISO-8601 datetimes)."""

    kind: Literal["csv"]
    file: str
    unit: str = "kW"
    scale: float = Field(1.0, gt=0)
    time_column: str = "timestamp"
    value_column: str = "value"


RENEWABLE_UNION = RegistryUnion("kind", RENEWABLE_SOURCE_SPECS)
RenewableSource = Annotated[Any, RENEWABLE_UNION]
"""One site's renewable trace source: any registered kind."""


class BandwidthVariance(Strict):
    kind: Literal["variance"] = "variance"
    cv: float = Field(0.0, ge=0, le=2, description="Coefficient of variation around nominal.")
    corr_s: float = Field(600.0, gt=0, description="Correlation time of the variance process.")
    seed: int | None = None


# One entry of ``traces.bandwidth.events`` (hours, percent; one link or '*'); testbed.inputs turns it
# into the trace side's testbed.traces.bandwidth.DegradationEvent (seconds, fraction, no link).
class DegradationEventEntry(Strict):
    link: str = Field(description="Link key 'a-b' (either order), or '*' for every link.")
    start_h: float = Field(ge=0)
    duration_h: float = Field(gt=0)
    degradation_pct: float = Field(ge=0, lt=100, description="0 = no effect (lets sweeps include an undegraded level).")


class BandwidthTraces(Strict):
    default: BandwidthVariance = BandwidthVariance()
    per_link: dict[str, BandwidthVariance] = Field(default_factory=dict)
    steady_degradation_pct: float = Field(0.0, ge=0, lt=100, description="Applied to every link for the whole run.")
    events: list[DegradationEventEntry] = Field(default_factory=list)


class ForecastError(Strict):
    """Multiplicative error: forecast = truth * exp(e), e ~ N(ln(1 + bias), noise)."""

    bias_pct: float = Field(0.0, gt=-100, le=1000)
    noise_pct: float = Field(0.0, ge=0, le=500)
    seed: int | None = None


class Forecasts(Strict):
    window: ForecastError = ForecastError()
    bandwidth: Literal["nominal", "trace", "trace_with_error"] = "nominal"
    bandwidth_error: ForecastError = ForecastError()


class Traces(Strict):
    renewable: dict[str, RenewableSource] = Field(
        description="Per site name, or 'default' for every site not named."
    )
    bandwidth: BandwidthTraces = BandwidthTraces()
    forecast: Forecasts = Forecasts()


rebuild_on_change([Traces], RENEWABLE_SOURCE_SPECS)
