"""Where a scenario's traces come from: generators (seeded) or files in the real formats."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from testbed.spec.grid_signals import GRID_SIGNALS, CarbonTraces, PriceTraces
from testbed.spec.base import FloatPair, Strict
from testbed.spec.union import Hook, Kind, KindRegistry, RegistryUnion, rebuild_on_change

TRACE_KINDS: KindRegistry[Kind] = KindRegistry("trace kind", "kind")
"""Renewable trace kinds by ``kind``, each entry its source model and its builder
``(source, testbed.traces.TraceContext) -> Trace``. A built-in's model is declared below with
``@renewable_source("testbed.traces.<file>:build")``; a plug-in's file decorates its builder with
``@testbed.traces.register_trace_kind(ItsModel)``."""


def renewable_source(build: Hook):
    """Class decorator of a renewable trace source model (a ``Strict`` model with ``kind: Literal[...]``):
    register it with its builder, a callable or the ``"module:function"`` that names it."""
    return TRACE_KINDS.declare(build)


@renewable_source("testbed.traces.windows:build")
class CurtailmentWindows(Strict):
    """Seeded synthetic renewable-surplus windows (CAISO-calibrated by default: mean 2.5 h)."""

    kind: Literal["curtailment_windows"] = Field(description="Trace kind: curtailment_windows (seeded synthetic renewable-surplus windows).")
    capacity_kw: float = Field(gt=0, description="Surplus power inside a window (upper end).")
    mean_window_h: float = Field(2.5, gt=0, le=24, description="Mean length of a surplus window in hours.")
    windows_per_day: float = Field(1.6, ge=0, le=24, description="Mean number of surplus windows per day.")
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
    seed: int | None = Field(None, description="Fixed sub-seed of this random stream (default: derived from the scenario's seed, so that `--seed` moves it).")
    mean_cover: float = Field(0.3, ge=0, le=1, description="Mean cloud cover, 0 (clear) to 1 (overcast).")
    corr_h: float = Field(2.0, gt=0, description="Correlation time of the cloud cover in hours (how long a cloudy spell lasts).")


@renewable_source("testbed.traces.solar:build")
class Solar(Strict):
    """PV power from pvlib clear-sky irradiance at the site's location times a seeded cloud process."""

    kind: Literal["solar"] = Field(description="Trace kind: solar (pvlib clear-sky PV times a seeded cloud process).")
    capacity_kw: float = Field(gt=0, description="Peak PV power of the site in kW.")
    performance_ratio: float = Field(0.8, gt=0, le=1, description="Fraction of clear-sky PV power the system delivers (losses of inverter, wiring, heat).")
    clouds: CloudModel = Field(CloudModel(), description="The seeded cloud-cover process that dims the clear-sky power.")


@renewable_source("testbed.traces.caiso:build")
class Caiso(Strict):
    """CAISO 'Production and Curtailments' workbook (.xlsx) or the same table as CSV."""

    kind: Literal["caiso"] = Field(description="Trace kind: caiso (the CAISO Production and Curtailments workbook or its CSV).")
    file: str = Field(description="Path of the CAISO .xlsx or .csv file (relative to the scenario file; else a file testbed ships, e.g. traces/samples/...).")
    column: str = Field("solar_curtailment", description="solar_curtailment | wind_curtailment | total_curtailment | production:<Column>")
    scale_to_kw: float = Field(
        gt=0, description="Required: the kW that the series' maximum over the scenario window maps to (CAISO "
        "data are grid-scale MW; read unscaled, a curtailment series would feed a site hundreds of MW).")


@renewable_source("testbed.traces.google:build")
class GooglePower(Strict):
    """Google 2019 power-trace CSV (measured_power_util / production_power_util, 5-minute)."""

    kind: Literal["google"] = Field(description="Trace kind: google (a Google 2019 power-trace CSV).")
    file: str = Field(description="Path of the Google power-trace CSV (relative to the scenario file; else a file testbed ships, e.g. traces/samples/...).")
    column: Literal["measured_power_util", "production_power_util"] = Field("measured_power_util", description="Which utilisation column to replay.")
    cell: str | None = Field(None, description="Keep only rows of this cell (the trace's `cell` column; default: all).")
    pdu: str | None = Field(None, description="Keep only rows of this PDU (the trace's `pdu` column; default: the mean of all PDUs per 5-minute slot).")
    capacity_kw: float = Field(gt=0, description="Power in kW that utilisation 1.0 stands for at this site.")
    mode: Literal["available", "utilisation"] = Field("available", description="available: capacity x (1 - utilisation) is free for the testbed; utilisation: capacity x utilisation.")
    align: Literal["day", "week", "trace_start"] = Field(
        "day", description="What scenario t=0 replays: the trace instant with the same US Pacific time of day "
        "as start (day), the same weekday and time of day (week), or the trace start 2019-05-01 00:00 PT (trace_start).")
    offset_h: float = Field(0.0, ge=-24 * 366, le=24 * 366, description="Hours added after the alignment (any sign).")


@renewable_source("testbed.traces.google_synthetic:build")
class GoogleSynthetic(Strict):
    """Seeded synthetic Google-2019-like PDU utilisation per site (testbed/traces/google_synthetic.py)."""

    kind: Literal["google_synthetic"] = Field(description="Trace kind: google_synthetic (seeded Google-2019-like PDU utilisation).")
    capacity_kw: float | None = Field(None, gt=0, description="Site power capacity (kW); or capacity_per_active.")
    capacity_per_active: float | None = Field(
        None, gt=0, description="Site capacity as a multiple of its nodes' full active power (nodes x p_active_kw).")
    mode: Literal["available", "utilisation"] = Field("available", description="available: capacity x (1 - utilisation) is free for the testbed; utilisation: capacity x utilisation.")
    mean_util: FloatPair = Field((0.45, 0.75), description="Range of the per-site mean utilisation.")
    diurnal_amp: float = Field(0.05, ge=0, le=0.5, description="Amplitude of the daily swing of utilisation (fraction of 1).")
    peak_h: float = Field(15.0, ge=0, lt=24, description="Local hour of the utilisation peak.")
    noise_sd: float = Field(0.04, ge=0, le=0.5, description="Standard deviation of the AR(1) noise on utilisation (fraction of 1).")
    corr_h: float = Field(2.0, gt=0, description="Correlation time of the noise in hours.")
    seed: int | None = Field(None, description="Fixed sub-seed of this random stream (default: derived from the scenario's seed, so that `--seed` moves it).")

    @model_validator(mode="after")
    def _one_capacity(self) -> "GoogleSynthetic":
        if (self.capacity_kw is None) == (self.capacity_per_active is None):
            raise ValueError("give exactly one of capacity_kw and capacity_per_active")
        lo, hi = self.mean_util
        if not 0 <= lo <= hi <= 1:
            raise ValueError("mean_util must satisfy 0 <= low <= high <= 1")
        return self


@renewable_source("testbed.traces.csvtrace:build")
class CsvSeries(Strict):
    """Plain ``timestamp,value`` CSV (seconds from scenario start, or ISO-8601 datetimes)."""

    kind: Literal["csv"] = Field(description="Trace kind: csv (a plain time,value CSV file).")
    file: str = Field(description="Path of the CSV file (relative to the scenario file; else a file testbed ships, e.g. traces/samples/...).")
    unit: str = Field("kW", description="Unit of the values, recorded with the trace (renewable power is read as kW: convert with scale).")
    scale: float = Field(1.0, gt=0, description="Factor every value is multiplied by after the unit conversion.")
    time_column: str = Field("timestamp", description="Column with the time: seconds from the scenario start, or ISO-8601 date-times.")
    value_column: str = Field("value", description="Column with the power values.")


RENEWABLE_UNION = RegistryUnion("kind", TRACE_KINDS)
RenewableSource = Annotated[Any, RENEWABLE_UNION]
"""One site's renewable trace source: any registered kind."""


class BandwidthVariance(Strict):
    kind: Literal["variance"] = Field("variance", description="Trace kind: variance (multiplicative seeded noise around the nominal rate).")
    cv: float = Field(0.0, ge=0, le=2, description="Coefficient of variation around nominal.")
    corr_s: float = Field(600.0, gt=0, description="Correlation time of the variance process.")
    seed: int | None = Field(None, description="Fixed sub-seed of this random stream (default: derived from the scenario's seed, so that `--seed` moves it).")


# One entry of ``traces.bandwidth.events`` (hours, percent; one link or '*'); testbed.inputs turns it
# into the trace side's testbed.traces.bandwidth.DegradationEvent (seconds, fraction, no link).
class DegradationEventEntry(Strict):
    link: str = Field(description="Link key 'a-b' (either order), or '*' for every link.")
    start_h: float = Field(ge=0, description="When the degradation starts, in scenario hours.")
    duration_h: float = Field(gt=0, description="How long the degradation lasts, in hours.")
    degradation_pct: float = Field(ge=0, lt=100, description="0 = no effect (lets sweeps include an undegraded level).")


class BandwidthTraces(Strict):
    default: BandwidthVariance = Field(BandwidthVariance(), description="Variance process of every link without a per_link entry.")
    per_link: dict[str, BandwidthVariance] = Field(default_factory=dict, description="Variance process per link, keyed 'a-b' (overrides default for that link).")
    steady_degradation_pct: float = Field(0.0, ge=0, lt=100, description="Applied to every link for the whole run.")
    events: list[DegradationEventEntry] = Field(default_factory=list, description="Degradation events: a link ('a-b' or '*') loses a percentage of its bandwidth for a while.")


class ForecastError(Strict):
    """Multiplicative error: forecast = truth * exp(e), e ~ N(ln(1 + bias), noise)."""

    bias_pct: float = Field(0.0, gt=-100, le=1000, description="Systematic error in percent: the forecast is on average (1 + bias) x the truth.")
    noise_pct: float = Field(0.0, ge=0, le=500, description="Random error in percent (standard deviation of the log error).")
    seed: int | None = Field(None, description="Fixed sub-seed of this random stream (default: derived from the scenario's seed, so that `--seed` moves it).")


class Forecasts(Strict):
    window: ForecastError = Field(ForecastError(), description="Error of the renewable-window forecast the policies see.")
    bandwidth: Literal["nominal", "trace", "trace_with_error"] = Field("nominal", description="Bandwidth the policies see: nominal (the link's rate), trace (the true trace) or trace_with_error.")
    bandwidth_error: ForecastError = Field(ForecastError(), description="Error of the bandwidth forecast when bandwidth is trace_with_error.")


class Traces(Strict):
    renewable: dict[str, RenewableSource] = Field(
        description="Per site name, or 'default' for every site not named."
    )
    bandwidth: BandwidthTraces = Field(BandwidthTraces(), description="Bandwidth over time per link: nominal rate x a seeded variance x degradation events.")
    forecast: Forecasts = Field(Forecasts(), description="What the policies see: forecasts with error; the substrate always sees the true traces.")
    carbon: CarbonTraces | None = Field(None, description="Carbon intensity of grid power per site, gCO2/kWh (None: no co2_kg accounting).")
    price: PriceTraces | None = Field(None, description="Price of grid power per site, currency/kWh (None: no grid_cost accounting).")


rebuild_on_change([CarbonTraces, PriceTraces, Traces], GRID_SIGNALS)
rebuild_on_change([Traces], TRACE_KINDS)
