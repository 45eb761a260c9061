"""Materialise a scenario's inputs: true traces per site and link, forecasts, and jobs.

Everything here is a pure function of the validated scenario (and its seed): the same
inputs feed every policy and every substrate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.errors import SpecError, TraceError
from testbed.spec.scenario import Scenario
from testbed.spec.topology import directed_links
from testbed.traces import DegradationEvent, Trace, TraceContext, bandwidth_trace, build_renewable
from testbed.traces.forecast import BandwidthForecaster, WindowForecaster
from testbed.traces.grid_signals import GridSignals, build_grid_signals
from testbed.traces.kinds import sub_seed as _sub_seed
from testbed.workload import JobSubmission, generate_jobs

PAD_S = 86400.0
"""Generated traces run one day past the scenario so windows and transfers near the end are not cut."""


@dataclass(frozen=True)
class Inputs:
    scenario: Scenario
    seed: int
    renewable_kw: dict[str, Trace]
    bandwidth_gbps: dict[tuple[str, str], Trace]
    latency_ms: dict[tuple[str, str], float]
    jobs: list[JobSubmission]
    windows: WindowForecaster
    bandwidth: BandwidthForecaster
    grid: GridSignals = GridSignals({}, {}, None)  # carbon intensity and price of grid power per site
    queue: dict[tuple[str, str], str] = field(default_factory=dict)  # each link direction's queue: fair or fifo

    @property
    def sites(self) -> list[str]:
        return [s.name for s in self.scenario.sites]


def _renewable(sc: Scenario, seed: int, site_name: str) -> Trace:
    """One site's renewable trace, by the builder of its source's kind (testbed.spec.trace_sources.TRACE_KINDS)."""
    src = sc.traces.renewable.get(site_name) or sc.traces.renewable["default"]
    ctx = TraceContext(scenario=sc, site_name=site_name, seed=seed, horizon_s=sc.duration_s + PAD_S,
                       step_s=sc.step_s, name=f"renewable:{site_name}")
    return build_renewable(src, ctx)


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
            rate = link.directed_bandwidth_gbps(src, dst)
            nominal[(src, dst)] = rate
            traces[(src, dst)] = bandwidth_trace(
                nominal_bandwidth_gbps=rate, duration_s=sc.duration_s + PAD_S, step_s=sc.step_s,
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
    directed = directed_links(sc.sites, sc.links)
    latency = {d.key: d.latency_ms for d in directed}
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
    grid = build_grid_signals(sc, seed, sc.duration_s + PAD_S)
    return Inputs(sc, seed, renewable, bw_truth, latency, jobs, windows, bandwidth, grid,
                  queue={d.key: d.queue for d in directed})
