"""Materialise a scenario's inputs: true traces per site and link, forecasts, and jobs.

Everything here is a pure function of the validated scenario (and its seed): the same
inputs feed every policy and every substrate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import SpecError, TraceError
from testbed.seeding import derive_seed
from testbed.spec.scenario import Scenario
from testbed.spec.topology import link_latency_ms
from testbed.spec.trace_sources import Caiso, CsvSeries, CurtailmentWindows, GooglePower, GoogleSynthetic, Solar
from testbed.traces import (
    DegradationEvent,
    Trace,
    bandwidth_trace,
    curtailment_windows,
    load_caiso,
    load_csv,
    load_google_power,
    solar_power,
)
from testbed.traces.forecast import BandwidthForecaster, WindowForecaster
from testbed.workload import JobSpec, generate_jobs

PAD_S = 86400.0
"""Generated traces run one day past the scenario so windows and transfers near the end are not cut."""


@dataclass(frozen=True)
class Inputs:
    scenario: Scenario
    seed: int
    renewable_kw: dict[str, Trace]
    bandwidth_gbps: dict[tuple[str, str], Trace]
    latency_ms: dict[tuple[str, str], float]
    jobs: list[JobSpec]
    windows: WindowForecaster
    bandwidth: BandwidthForecaster

    @property
    def sites(self) -> list[str]:
        return [s.name for s in self.scenario.sites]


def _sub_seed(explicit: int | None, base: int, *keys: object) -> int:
    return derive_seed(explicit, *keys) if explicit is not None else derive_seed(base, *keys)


def _renewable(sc: Scenario, seed: int, site_name: str) -> Trace:
    src = sc.traces.renewable.get(site_name) or sc.traces.renewable["default"]
    site = sc.site(site_name)
    horizon, step, name = sc.duration_s + PAD_S, sc.step_s, f"renewable:{site_name}"
    if isinstance(src, CurtailmentWindows):
        start_hour_utc = sc.start.hour + sc.start.minute / 60.0
        extra = 0.0 if src.offset_h == "auto" else float(src.offset_h)
        # window centres follow the site's solar noon, expressed in scenario hours-of-day
        offset_h = extra - site.local_offset_h - start_hour_utc
        if abs(offset_h) > 24.0:  # e.g. UTC+14 and a 23:00 start: the same hour of day, a day earlier
            offset_h = math.fmod(offset_h, 24.0)
        return curtailment_windows(
            duration_s=horizon, step_s=step, seed=_sub_seed(src.seed, seed, "renewable", site_name),
            mean_window_h=src.mean_window_h, windows_per_day=src.windows_per_day, capacity_kw=src.capacity_kw,
            base_frac=src.base_frac, offset_h=offset_h, overlap=src.overlap, name=name,
        )
    if isinstance(src, Solar):
        return solar_power(
            duration_s=horizon, step_s=step, start=sc.start, lat_deg=site.lat_deg, lon_deg=site.lon_deg,
            capacity_kw=src.capacity_kw, cloud_seed=_sub_seed(src.clouds.seed, seed, "clouds", site_name),
            mean_cover=src.clouds.mean_cover, cloud_corr_h=src.clouds.corr_h,
            performance_ratio=src.performance_ratio, name=name,
        )
    if isinstance(src, Caiso):
        return load_caiso(
            Path(src.file), start=sc.start, duration_s=sc.duration_s, step_s=step, column=src.column,
            scale_to_kw=src.scale_to_kw, name=name,
        )
    if isinstance(src, GooglePower):
        return load_google_power(
            Path(src.file), column=src.column, cell=src.cell, pdu=src.pdu, capacity_kw=src.capacity_kw,
            start_offset_s=src.start_offset_h * 3600.0, duration_s=sc.duration_s, step_s=step, mode=src.mode,
            name=name,
        )
    if isinstance(src, GoogleSynthetic):
        from testbed.traces.google_synthetic import google_like_power

        cap = src.capacity_kw or src.capacity_per_active * site.nodes * sc.node_type_of(site_name).p_active_kw
        return google_like_power(
            duration_s=horizon, seed=_sub_seed(src.seed, seed, "google_synthetic", site_name), capacity_kw=cap,
            local_offset_h=site.local_offset_h, start_hour_utc=sc.start.hour + sc.start.minute / 60.0,
            mean_util=src.mean_util, diurnal_amp=src.diurnal_amp, peak_h=src.peak_h, noise_sd=src.noise_sd,
            corr_h=src.corr_h, mode=src.mode, name=name,
        )
    if isinstance(src, CsvSeries):
        return load_csv(
            Path(src.file), unit=src.unit, start=sc.start, time_column=src.time_column,
            value_column=src.value_column, scale=src.scale, duration_s=sc.duration_s, step_s=step, name=name,
        )
    raise TypeError(f"unhandled renewable source {type(src).__name__}")  # pragma: no cover


def _renewables(sc: Scenario, seed: int) -> dict[str, Trace]:
    """Every site's renewable trace; a trace file that is wrong (columns, NaN, order, coverage,
    sheet) is a SpecError naming the scenario field and the file, the same in validate and run."""
    out: dict[str, Trace] = {}
    problems: list[tuple[str, str]] = []
    for s in sc.sites:
        key = s.name if s.name in sc.traces.renewable else "default"
        try:
            out[s.name] = _renewable(sc, seed, s.name)
        except ValueError as e:  # a generator's own check on its parameters (the model's bounds let it through)
            problem = (f"traces.renewable.{key}", str(e))
            if problem not in problems:
                problems.append(problem)
        except TraceError as e:
            src = sc.traces.renewable[key]
            field = f"traces.renewable.{key}" + (".file" if getattr(src, "file", None) else "")
            if getattr(src, "file", None) and e.where == src.file:
                problem = (field, f"{e.where}: {e.message}")
            else:
                problem = (field, f"{e.message} ({e.where})")
            if problem not in problems:
                problems.append(problem)
    if problems:
        raise SpecError(problems)
    return out


def _bandwidth(sc: Scenario, seed: int) -> tuple[dict[tuple[str, str], Trace], dict[tuple[str, str], float]]:
    bw = sc.traces.bandwidth
    traces: dict[tuple[str, str], Trace] = {}
    nominal: dict[tuple[str, str], float] = {}
    for link in sc.links:
        var = bw.per_link.get(link.key) or bw.per_link.get(f"{link.b}-{link.a}") or bw.default
        events = [
            DegradationEvent(e.start_h * 3600.0, e.duration_h * 3600.0, e.degradation_pct / 100.0)
            for e in bw.events
            if e.link in ("*", link.key, f"{link.b}-{link.a}")
        ]
        if bw.steady_degradation_pct > 0:
            events.append(DegradationEvent(0.0, sc.duration_s + PAD_S, bw.steady_degradation_pct / 100.0))
        for src, dst in ((link.a, link.b), (link.b, link.a)):
            rate = link.rate_gbps(src, dst)
            nominal[(src, dst)] = rate
            traces[(src, dst)] = bandwidth_trace(
                nominal_gbps=rate, duration_s=sc.duration_s + PAD_S, step_s=sc.step_s,
                seed=_sub_seed(var.seed, seed, "bandwidth", src, dst), cv=var.cv, corr_s=var.corr_s,
                events=events, name=f"bandwidth:{src}->{dst}",
            )
    return traces, nominal


def require_jobs(inputs: Inputs) -> None:
    """SpecError if a migration study has no job to run: Poisson arrivals (with this seed) drew none.
    ``run`` and ``validate`` call it; the inputs themselves are fine for a library user."""
    sc = inputs.scenario
    if sc.workloads is not None and not inputs.jobs:
        from testbed.spec.limits import expected_jobs

        raise SpecError([("workloads.arrivals.jobs_per_day", (
            f"the arrivals draw no job within the run (seed {inputs.seed}; {expected_jobs(sc):.2g} expected): "
            "raise jobs_per_day or until_h, or list jobs"))])


def build_inputs(sc: Scenario, seed: int | None = None) -> Inputs:
    """``seed`` overrides the scenario's seed (explicit sub-seeds in the file stay fixed)."""
    if seed is not None:
        sc = sc.model_copy(update={"seed": seed})
    seed = sc.seed
    renewable = _renewables(sc, seed)
    bw_truth, nominal = _bandwidth(sc, seed)
    sites = {s.name: s for s in sc.sites}
    latency = {}
    for link in sc.links:
        lat = link_latency_ms(link, sites)
        latency[(link.a, link.b)] = latency[(link.b, link.a)] = lat
    fc = sc.traces.forecast
    windows = WindowForecaster(
        renewable,
        {s.name: sc.node_type_of(s.name).p_active_kw for s in sc.sites},
        bias_frac=fc.window.bias_pct / 100.0,
        noise_frac=fc.window.noise_pct / 100.0,
        seed=_sub_seed(fc.window.seed, seed, "forecast-window"),
    )
    bandwidth = BandwidthForecaster(
        bw_truth, nominal, mode=fc.bandwidth,
        bias_frac=fc.bandwidth_error.bias_pct / 100.0, noise_frac=fc.bandwidth_error.noise_pct / 100.0,
        seed=_sub_seed(fc.bandwidth_error.seed, seed, "forecast-bandwidth"), step_s=sc.step_s,
    )
    jobs = generate_jobs(sc) if sc.workloads is not None else []
    return Inputs(sc, seed, renewable, bw_truth, latency, jobs, windows, bandwidth)
