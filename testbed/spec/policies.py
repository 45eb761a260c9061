"""Policy entries of a scenario. Each runs on identical traces; results go side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from testbed.spec.federated import SELECTION_POLICIES
from testbed.spec.base import Strict
from testbed.spec.union import Hook, Kind, KindRegistry, RegistryUnion

Correction = Literal["protocol_efficiency", "slow_start"]
BandwidthBasis = Literal["nominal", "fair_share", "probe"]


class FeasibilityModel(Strict):
    """Parameters of Eq. 1 / Eq. 2 (the migration paper, arXiv 2511.16182). Corrections are off by default. The scenario's is the
    reference recorded for policies without a model, and the default of every policy's own parameters."""

    alpha: float = Field(0.1, gt=0, le=1, description="Eq. 1: a migration must take less than alpha x the remaining renewable window at the destination.")
    t_load_s: float = Field(10.3, ge=0, description="Load time at the destination, s (the fixed part with "
                            "t_load_s_per_gb; the paper: 10.3 s for any size).")
    t_load_s_per_gb: float = Field(0.0, ge=0, description="Load time per GB of checkpoint, s/GB: T_load = t_load_s + "
                                   "S x t_load_s_per_gb (`testbed calibrate load` measures it; 0 = the paper).")
    t_downtime_s: float = Field(0.4, ge=0, description="Pause-to-resume overhead of a migration in seconds (the paper: 0.4 s).")
    robust_degradation_frac: float = Field(0.5, ge=0, lt=1, description="Class A = still feasible at this bandwidth loss.")
    corrections: list[Correction] = Field(default_factory=list, description="Named corrections to the paper's transfer time, off by default: protocol_efficiency, slow_start.")
    bandwidth_basis: BandwidthBasis = Field("nominal", description=(
        "The bandwidth B the prediction assumes: nominal (the link's forecast rate: the paper), fair_share (that rate "
        "less the declared cross-traffic's UDP and Poisson load, split among its TCP flows + 1: "
        "testbed.crosstraffic.model), or probe (a short measured TCP probe over the real path before deciding; on sim "
        "the modelled share x lognormal noise; its time and bytes charged to the migration). Recorded per migration "
        "as predicted_bandwidth_basis."))
    probe_s: float = Field(2.0, gt=0, le=600, description=(
        "bandwidth_basis probe: how long the probe runs, scenario seconds (on emulated substrates at least "
        "0.5 wall seconds, so that TCP leaves slow start); charged to the migration (probe_s)."))


class FeasibilityOverrides(Strict):
    """A policy's own Eq. 1 / Eq. 2 parameters. Each one it leaves unset is the scenario's
    ``feasibility`` model's, so one value there (e.g. ``feasibility.alpha``) moves every policy."""

    alpha: float | None = Field(None, gt=0, le=1, description="Default: the scenario's feasibility.alpha.")
    t_load_s: float | None = Field(None, ge=0, description="Default: the scenario's feasibility.t_load_s.")
    t_load_s_per_gb: float | None = Field(None, ge=0, description="Default: the scenario's feasibility.t_load_s_per_gb.")
    t_downtime_s: float | None = Field(None, ge=0, description="Default: the scenario's feasibility.t_downtime_s.")
    robust_degradation_frac: float | None = Field(
        None, ge=0, lt=1, description="Default: the scenario's feasibility.robust_degradation_frac.")
    corrections: list[Correction] | None = Field(None, description="Default: the scenario's feasibility.corrections.")
    bandwidth_basis: BandwidthBasis | None = Field(None, description="Default: the scenario's feasibility.bandwidth_basis.")
    probe_s: float | None = Field(None, gt=0, le=600, description="Default: the scenario's feasibility.probe_s.")

    def feasibility_model(self, scenario_model: FeasibilityModel) -> FeasibilityModel:
        """The model this policy predicts with: its own parameters where set, else the scenario's."""
        own = {k: getattr(self, k) for k in FeasibilityModel.model_fields if getattr(self, k) is not None}
        return scenario_model.model_copy(update=own)

    def with_scenario_model(self, scenario_model: FeasibilityModel):
        """This entry with its unset parameters filled in from the scenario's model (as the scenario
        resolves it, so that the resolved scenario shows the model each policy predicts with)."""
        unset = {k: getattr(scenario_model, k) for k in FeasibilityModel.model_fields if getattr(self, k) is None}
        return self.model_copy(update=unset) if unset else self


@dataclass(frozen=True)
class PolicyKind(Kind):
    """A migration policy's entry: its model, and its builder ``(label, scenario, spec) -> Policy``
    (``(label, scenario)`` where ``spec_arg`` is False), usually a ``controller.policy_api.Policy`` subclass."""

    spec_arg: bool = True


MIGRATION_POLICIES: KindRegistry[PolicyKind] = KindRegistry(
    "migration policy", "name", PolicyKind, base="testbed.controller.policy_api:Policy")
"""Migration policies by name, each entry its model and its builder. A built-in's model is declared
below with ``@migration_policy("testbed.policies.<file>:<Class>")``; a plug-in's file decorates its
class with ``@testbed.policies.register_policy(ItsModel)``."""


def migration_policy(build: Hook, *, spec_arg: bool = True):
    """Class decorator of a migration-policy model (a ``MigrationPolicyBase`` with ``name: Literal[...]``):
    register it with its builder, a callable or the ``"module:Class"`` that names it."""
    return MIGRATION_POLICIES.declare(build, spec_arg=spec_arg)


class _Base(Strict):
    label: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Output name (default: name).")
    grid_topup_kw: float | None = Field(
        None, ge=0, description="Grid power per site this policy tops renewables up with, at most (kW); the site's "
        "grid limit still applies. None = whatever the grid limit allows. 0 = run on renewables alone (caps follow "
        "the trace).",
    )


@migration_policy("testbed.policies.static:StaticPolicy", spec_arg=False)
class Static(_Base):
    name: Literal["static"] = Field(description="static: jobs stay where they start (the baseline).")


DEFAULT_MIN_DWELL_H = 2.0
DEFAULT_RETURN_MARGIN = 1.0


class Damping(Strict):
    """Damping of a migrating policy's moves, so that a job does not bounce between sites.
    ``min_dwell_h: 0`` and ``return_margin: 0`` together are the paper's behaviour (no damping)."""

    min_dwell_h: float = Field(
        DEFAULT_MIN_DWELL_H, ge=0,
        description="Hours a job must run at a site after a move (completed or not) before it may move again; "
        "0 = no dwell (the paper).",
    )
    return_margin: float = Field(
        DEFAULT_RETURN_MARGIN, ge=0,
        description="A move back to the site the job last left must save (1 + return_margin) x its energy cost "
        "(Eq. 2 with a margin); 0 = no extra margin (the paper).",
    )


@migration_policy("testbed.policies.energy_only:EnergyOnlyPolicy")
class EnergyOnly(_Base, Damping):
    name: Literal["energy_only"] = Field(description="energy_only: migrate to the site with the most renewable power, ignoring transfer time.")


class AlgorithmOne(_Base, FeasibilityOverrides):
    """The parameters of Algorithm 1 (the filter, the risk budget, the utility) without damping:
    ``feasibility_aware`` adds :class:`Damping`, ``feasibility_aware_paper`` runs without it."""

    epsilon: float | None = Field(None, gt=0, le=0.5, description="Risk budget in (0, 0.5]; None = deterministic Eq. 1.")
    assumed_window_noise_pct: float | None = Field(
        None, ge=0, description="Forecast spread the risk budget assumes (default: the scenario's window noise)."
    )
    assumed_bandwidth_noise_pct: float = Field(
        0.0, ge=0, le=200,
        description="With epsilon: bandwidth uncertainty the risk budget hedges (log-normal sigma, %); the budget "
        "is split between window and bandwidth by the union bound. 0 = the bandwidth forecast is trusted.",
    )
    gamma: float = Field(1.0, ge=0, description="Weight of renewable availability R(d).")
    beta: float = Field(0.5, ge=0, description="Weight of delay L(d), hours.")
    min_gain: float = Field(0.05, ge=0, description="Utility gain over staying that a move must exceed.")


    @model_validator(mode="after")
    def _bandwidth_noise_needs_epsilon(self):
        if self.assumed_bandwidth_noise_pct > 0 and self.epsilon is None:
            raise ValueError("assumed_bandwidth_noise_pct: needs a risk budget (set epsilon)")
        return self


@migration_policy("testbed.policies.feasibility_aware:FeasibilityAwarePolicy")
class FeasibilityAware(AlgorithmOne, Damping):
    name: Literal["feasibility_aware"] = Field(description="feasibility_aware: migrate only when Eq. 1 holds (Algorithm 1, with a risk budget).")


@migration_policy("testbed.policies.no_filter:NoFilterPolicy")
class NoFilter(FeasibilityAware):
    """feasibility_aware with the Eq. 1 filter disabled: the independent test of Eq. 1."""

    name: Literal["no_filter"] = Field(description="no_filter: feasibility_aware with the Eq. 1 filter off.")  # type: ignore[assignment]


@migration_policy("testbed.policies.feasibility_classes:FeasibilityClassesPolicy")
class FeasibilityClasses(FeasibilityAware):
    """feasibility_aware with the paper's fixed transfer-time classes as its hard filter instead of
    Eq. 1: class A (transfer < 60 s) always passes, class C (>= 300 s) never does, and class B
    passes as ``class_b`` says. Eq. 2 and the ranking are feasibility_aware's."""

    name: Literal["feasibility_classes"] = Field(description="feasibility_classes: feasibility_aware filtering on the paper's fixed transfer-time classes.")  # type: ignore[assignment]
    class_b: Literal["eq1", "always"] = Field(
        "eq1", description="Class B (60-300 s): 'eq1' = only if Eq. 1 holds (the paper's Algorithm 1), "
        "'always' = the cut-offs alone decide.",
    )


@migration_policy("testbed.policies.placement_only:PlacementOnlyPolicy", spec_arg=False)
class PlacementOnly(_Base):
    """Places arriving jobs with feasibility_aware's placement and never migrates: beside static and
    feasibility_aware it splits a migrating policy's gain into placement's and migration's."""

    name: Literal["placement_only"] = Field(description="placement_only: place arriving jobs as feasibility_aware "
                                            "does, never migrate (isolates placement from migration).")


@migration_policy("testbed.policies.feasibility_aware_paper:FeasibilityAwarePaperPolicy")
class FeasibilityAwarePaper(AlgorithmOne):
    """feasibility_aware as the paper's Algorithm 1: no damping. Its code is feasibility_aware's; the
    damping fields (:class:`Damping`) are not parameters here but fixed at 0, and setting one is refused."""

    name: Literal["feasibility_aware_paper"] = Field(description="feasibility_aware_paper: feasibility_aware undamped "
                                                     "(min_dwell_h 0, return_margin 0, not settable): the paper's Algorithm 1.")

    @model_validator(mode="before")
    @classmethod
    def _no_damping(cls, data: Any) -> Any:
        for field in Damping.model_fields:
            if isinstance(data, dict) and field in data:
                raise ValueError(f"{field}: feasibility_aware_paper is the paper's Algorithm 1 without damping "
                                 f"({field} is fixed at 0); to damp, use feasibility_aware with {field}")
        return data

    @property
    def min_dwell_h(self) -> float:
        """No minimum dwell: a job may move again at the next decision."""
        return 0.0

    @property
    def return_margin(self) -> float:
        """No return margin: a move back pays off as any move does (Eq. 2)."""
        return 0.0


MigrationPolicyBase = _Base
"""The base of a migration policy's model: ``label`` and ``grid_topup_kw`` come with it."""

POLICY_UNION = RegistryUnion("name", MIGRATION_POLICIES, SELECTION_POLICIES)
PolicySpec = Annotated[Any, POLICY_UNION]
"""A scenario's policy entry: any registered migration or selection (federated, PowerTrip study) policy."""


def policy_names() -> tuple[str, ...]:
    """Every registered policy name, migration policies first."""
    return MIGRATION_POLICIES.names() + SELECTION_POLICIES.names()


def policy_label(p) -> str:
    return p.label or p.name
