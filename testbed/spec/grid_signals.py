"""Grid signals of a scenario: carbon intensity and electricity price per site, and site batteries.

Carbon intensity (gCO2 per kWh drawn from the grid) and price (currency per kWh drawn from the
grid) are per-site traces, keyed by site name or ``default`` like ``traces.renewable``. Each
source is one registered kind (``@grid_signal_source``; its builder registers in
``testbed.traces.grid_signals``): a CSV file, a seeded synthetic daily shape, or a constant.
Batteries (``batteries:``) store curtailed renewable energy and discharge it before the grid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from testbed.spec.base import Strict
from testbed.spec.union import Hook, Kind, KindRegistry, RegistryUnion

GRID_SIGNALS: KindRegistry[Kind] = KindRegistry("grid signal kind", "kind")
"""Carbon / price trace kinds by ``kind``, each entry its source model and its builder
``(source, testbed.traces.grid_signals.SignalContext) -> Trace``. A built-in's model is declared below
with ``@grid_signal_source("testbed.traces.grid_signals:build_<kind>")``; a plug-in's file decorates
its builder with ``@testbed.traces.grid_signals.register_signal_kind(ItsModel)``."""

CARBON_UNITS: dict[str, float] = {"g/kWh": 1.0, "kg/MWh": 1.0, "kg/kWh": 1000.0, "t/MWh": 1000.0, "lb/MWh": 0.45359237}
"""Carbon-intensity units a CSV may be written in, and the factor to gCO2/kWh."""
PRICE_UNITS: dict[str, float] = {"per_kWh": 1.0, "per_MWh": 0.001}
"""Price units a CSV may be written in (currency per kWh or per MWh), and the factor to currency/kWh."""


def grid_signal_source(build: Hook):
    """Class decorator of a carbon / price source model (``kind: Literal[...]``): register it with its
    builder, a callable or the ``"module:function"`` that names it."""
    return GRID_SIGNALS.declare(build)


@grid_signal_source("testbed.traces.grid_signals:build_csv")
class SignalCsv(Strict):
    """A ``timestamp,value`` CSV: seconds from the scenario start or ISO-8601 date-times, one value per row
    that holds until the next row."""

    kind: Literal["csv"] = Field(description="Signal kind: csv (a time,value CSV file).")
    file: str = Field(description="Path of the CSV file (relative to the scenario file; else a file testbed ships, e.g. traces/samples/...).")
    unit: str | None = Field(
        None, description="Unit of the values: carbon g/kWh (default), kg/MWh, kg/kWh, t/MWh, lb/MWh; price "
        "per_kWh (default) or per_MWh (currency per MWh, e.g. day-ahead market prices).")
    scale: float = Field(1.0, gt=0, description="Factor every value is multiplied by after the unit conversion.")
    time_column: str = Field("timestamp", description="Column with the time: seconds from the scenario start, or ISO-8601 date-times.")
    value_column: str = Field("value", description="Column with the values.")


@grid_signal_source("testbed.traces.grid_signals:build_daily")
class SignalDaily(Strict):
    """Seeded synthetic signal with a daily shape: ``mean x (1 + amplitude_frac x cos(2 pi (h - peak_h) / 24))``
    at local hour ``h`` (the site's ``local_offset_h``), times lognormal AR(1) noise of mean 1."""

    kind: Literal["daily"] = Field(description="Signal kind: daily (seeded synthetic daily shape with noise).")
    mean: float = Field(ge=0, description="Mean value (carbon: gCO2/kWh; price: currency/kWh).")
    amplitude_frac: float = Field(0.3, ge=0, le=1, description="Daily swing as a fraction of the mean (0 = flat).")
    peak_h: float = Field(19.0, ge=0, lt=24, description="Local hour of the daily maximum (the minimum is 12 h later).")
    noise_cv: float = Field(0.1, ge=0, le=2, description="Coefficient of variation of the multiplicative noise (0 = the shape alone).")
    corr_h: float = Field(3.0, gt=0, description="Correlation time of the noise in hours.")
    seed: int | None = Field(None, description="Fixed sub-seed of this random stream (default: derived from the scenario's seed, so that `--seed` moves it).")


@grid_signal_source("testbed.traces.grid_signals:build_constant")
class SignalConstant(Strict):
    kind: Literal["constant"] = Field(description="Signal kind: constant (one value for the whole run).")
    value: float = Field(ge=0, description="The value (carbon: gCO2/kWh; price: currency/kWh).")


GRID_SIGNAL_UNION = RegistryUnion("kind", GRID_SIGNALS)
SignalSource = Annotated[Any, GRID_SIGNAL_UNION]


class CarbonTraces(Strict):
    """Carbon intensity of each site's grid power, gCO2 per kWh."""

    sites: dict[str, SignalSource] = Field(min_length=1, description="Per site name, or 'default' for every site not named.")


class PriceTraces(Strict):
    """Price of each site's grid power, currency per kWh."""

    currency: str = Field("EUR", pattern=r"^[A-Za-z]{1,8}$", description="Currency of the prices (ISO 4217 code, e.g. EUR, USD); recorded in the manifest.")
    sites: dict[str, SignalSource] = Field(min_length=1, description="Per site name, or 'default' for every site not named.")


class Battery(Strict):
    """A site battery: charged from renewable power the site would otherwise curtail, discharged before the grid."""

    capacity_kwh: float = Field(gt=0, description="Usable energy capacity, kWh.")
    charge_kw: float = Field(gt=0, description="Largest charging power, kW (drawn from the renewable surplus).")
    discharge_kw: float = Field(gt=0, description="Largest discharging power, kW (delivered to the site's load).")
    round_trip_efficiency: float = Field(0.9, gt=0, le=1, description="Energy out per energy in; the loss is booked when charging.")
    initial_soc_frac: float = Field(0.0, ge=0, le=1, description="State of charge at the start, fraction of capacity.")


def signal_sections(traces: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(field path, sources by key)`` of each grid-signal section present in ``traces``."""
    out = []
    if getattr(traces, "carbon", None) is not None:
        out.append(("traces.carbon.sites", traces.carbon.sites))
    if getattr(traces, "price", None) is not None:
        out.append(("traces.price.sites", traces.price.sites))
    return out


def keyed_problems(where: str, keys: Any, site_names: list[str]) -> list[tuple[str, str]]:
    """Every key is a site or 'default', and every site has an entry (its own or 'default')."""
    problems = [(f"{where}.{k}", f"unknown site {k!r}") for k in keys if k != "default" and k not in site_names]
    if "default" not in keys:
        problems += [(where, f"no entry for site {s!r} and no 'default'") for s in site_names if s not in keys]
    return problems


def signal_checks(sc: Any, base_dir: Path) -> tuple[list[tuple[str, str]], Any]:
    """Cross-checks of the grid signals and batteries (site keys, CSV units, files). Returns the
    problems and the scenario's ``traces`` with CSV paths resolved (None if nothing changed)."""
    from testbed.spec.files import with_trace_file

    names = [s.name for s in sc.sites]
    problems: list[tuple[str, str]] = []
    # a battery is optional per site: only unknown keys are wrong
    problems += [(f"batteries.{k}", f"unknown site {k!r}") for k in sc.batteries if k != "default" and k not in names]
    for i, p in enumerate(sc.policies):
        if getattr(p, "name", None) == "carbon_aware" and sc.traces.carbon is None:
            problems.append((f"policies[{i}]", "carbon_aware needs carbon intensity traces (traces.carbon)"))
        if getattr(p, "max_price_per_kwh", None) is not None and sc.traces.price is None:
            problems.append((f"policies[{i}].max_price_per_kwh", "needs price traces (traces.price)"))
    updates: dict[str, Any] = {}
    for where, sources in signal_sections(sc.traces):
        problems += keyed_problems(where, sources, names)
        units = CARBON_UNITS if where.startswith("traces.carbon") else PRICE_UNITS
        fixed = {}
        for key, src in sources.items():
            unit = getattr(src, "unit", None)
            if unit is not None and unit not in units:
                problems.append((f"{where}.{key}.unit", f"unknown unit {unit!r} (known: {', '.join(units)})"))
            done = with_trace_file(src, f"{where}.{key}.file", base_dir, sc.limits.max_trace_bytes, problems)
            if done is not None and done is not src:
                fixed[key] = done
        if fixed:
            section = "carbon" if where.startswith("traces.carbon") else "price"
            sec = getattr(sc.traces, section)
            updates[section] = sec.model_copy(update={"sites": {**sec.sites, **fixed}})
    return problems, (sc.traces.model_copy(update=updates) if updates else None)


__all__ = [
    "CARBON_UNITS", "GRID_SIGNALS", "GRID_SIGNAL_UNION", "PRICE_UNITS", "Battery", "CarbonTraces",
    "PriceTraces", "SignalConstant", "SignalCsv", "SignalDaily", "SignalSource", "grid_signal_source",
    "signal_checks", "signal_sections",
]

