"""The bandwidth the feasibility predictor assumes for a move (``feasibility.bandwidth_basis``).

- ``nominal``: the link's forecast rate (``inputs.bandwidth``): the paper, and today's behaviour;
- ``fair_share``: that rate under the scenario's declared cross-traffic on the direction
  (:func:`testbed.crosstraffic.model.fair_share_gbps` of :func:`~testbed.crosstraffic.model.expected_load`);
- ``probe``: what a short TCP probe over the path measures now (the substrate's
  :meth:`~testbed.substrate.base.Substrate.probe_bandwidth`: a real probe between the site namespaces
  on emulated substrates, the modelled share x lognormal noise on sim), at most one probe per link
  direction and decision time. A move decided on a probe is charged its time and bytes
  (``probe_s``, ``probe_bytes`` in migrations.parquet).

A probe measures goodput; the predictor's B is a line rate (``protocol_efficiency`` turns it into
goodput), so a probe's B is its goodput / :data:`testbed.feasibility.TCP_EFFICIENCY_MTU1500`.
"""

from __future__ import annotations

from dataclasses import dataclass

BASES = ("nominal", "fair_share", "probe")


@dataclass(frozen=True)
class Probe:
    """One probe of a link direction: the B it gives the predictor, its scenario seconds and bytes sent."""

    gbps: float
    scenario_s: float
    bytes_sent: int
    detail: str = ""


class BandwidthEstimator:
    """One run's (one policy's) bandwidth basis. ``prober(src, dst, t_s, duration_s) -> Probe``: the
    substrate's (None: probes refused)."""

    def __init__(self, inputs, basis: str = "nominal", *, probe_s: float = 2.0, prober=None):
        if basis not in BASES:
            raise ValueError(f"bandwidth_basis must be one of {', '.join(BASES)}, got {basis!r}")
        from testbed.crosstraffic.model import entries_by_direction, load_traces

        self._in = inputs
        self.basis = basis
        self.probe_s = probe_s
        self._prober = prober
        entries = inputs.scenario.cross_traffic
        self._by_dir = entries_by_direction(entries)
        self._traces = load_traces(entries) if basis == "fair_share" else {}
        self._probes: dict[tuple[str, str, float], Probe] = {}

    def gbps(self, src: str, dst: str, now_s: float) -> float:
        """B for a move src -> dst decided at ``now_s``."""
        forecast = self._in.bandwidth.forecast_gbps(src, dst, now_s)
        if self.basis == "nominal":
            return forecast
        if self.basis == "fair_share":
            from testbed.crosstraffic.model import expected_load, fair_share_gbps

            entries = self._by_dir.get((src, dst), [])
            if not entries:
                return forecast
            return fair_share_gbps(forecast, expected_load(entries, now_s, self._traces),
                                   queue=self._in.queue[(src, dst)])
        return self.probe(src, dst, now_s).gbps

    def probe(self, src: str, dst: str, now_s: float) -> Probe:
        key = (src, dst, now_s)
        got = self._probes.get(key)
        if got is None:
            if self._prober is None:
                raise ValueError("bandwidth_basis probe: this substrate cannot probe a path")
            got = self._probes[key] = self._prober(src, dst, now_s, self.probe_s)
        return got

    def probe_for(self, src: str, dst: str, now_s: float) -> Probe | None:
        """The probe a move src -> dst decided at ``now_s`` was based on (None: no probe)."""
        if self.basis != "probe":
            return None
        return self.probe(src, dst, now_s)


def basis_of(policy, scenario) -> tuple[str, float]:
    """The bandwidth basis and probe length a policy predicts with: its own model's where it has one
    (``policy.model``, a FeasibilityModel), else the scenario's ``feasibility``."""
    model = getattr(policy, "model", None)
    if model is None or not hasattr(model, "bandwidth_basis"):
        model = scenario.feasibility
    return model.bandwidth_basis, model.probe_s
