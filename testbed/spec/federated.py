"""The ``federated:`` block of a scenario and its site-selection policies (the PowerTrip study,
arXiv 2507.17904): synchronous FedAvg across power-constrained sites, where a policy chooses
which and how many sites join each round.

A scenario with a ``federated:`` block has no ``workloads:``; its ``policies:`` are the
selection policies below (``random``, ``static_k``, ``fixed_radius``, ``centralized``,
``powertrip``). Formulas are documented in ``testbed/federated/`` and docs/concepts/powertrip-study.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from testbed.spec.base import FloatPair, Strict
from testbed.spec.union import Hook, Kind, KindRegistry

RoundTime = Literal["straggler", "pooled", "pooled_eq7_as_written"]


class FlData(Strict):
    dataset: Literal["digits", "shapes"] = Field(
        "digits", description="digits: scikit-learn's bundled 8x8 digits; shapes: a generated, harder 8x8 set "
        "(noise, shifts, occlusion). Nothing is downloaded.")
    partition: Literal["iid", "dirichlet"] = Field("iid", description="iid: every site gets a random equal share; dirichlet: label shares per site from a Dirichlet(dirichlet_alpha) draw.")
    dirichlet_alpha: float = Field(0.5, gt=0, le=1000, description="Non-IID concentration (dirichlet only).")
    seed: int | None = Field(None, description="Partition seed (default: derived from the scenario seed).")


class FlTraining(Strict):
    model: Literal["mlp", "cnn"] = Field("mlp", description="Model trained: mlp (one hidden layer) or cnn (a small convolutional net).")
    hidden: int = Field(64, ge=4, le=1024, description="MLP hidden width.")
    local_epochs: int = Field(1, ge=1, le=100, description="Passes over its local data a selected site makes per round.")
    batch_size: int = Field(16, ge=1, le=4096, description="Mini-batch size of local SGD.")
    lr: float = Field(0.05, gt=0, le=10, description="Learning rate of local SGD.")
    momentum: float = Field(0.0, ge=0, lt=1, description="Momentum of local SGD (0 = plain SGD).")


class FlCompute(Strict):
    """Compute time of one site: ``local_epochs x n_i x data_scale / (samples_per_s x C_i)``,
    with ``C_i`` the site's effective capacity in reference nodes (sum of node speeds at the caps
    its power budget allows)."""

    samples_per_s: float | Literal["measured", "profile"] = Field(
        description="Training samples per second of one reference node (speed 1.0) at full power: a number, "
        "'measured': timed on this machine once per run, the model measured_model names (testbed.federated.throughput), "
        "or 'profile': each site's from a compute profile entry (profile, node_type, sites; "
        "testbed.spec.compute_profile).")
    profile: str = Field(
        "default", description="With samples_per_s 'profile': the compute profile file (JSON, relative to the "
        "scenario; `testbed calibrate compute` writes one), or 'default': the one shipped, "
        "testbed/data/compute-profile.json.")
    node_type: str | None = Field(
        None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="With samples_per_s 'profile': the profile "
        "entry every site not matched by sites uses (default: the site's own node_type from the topology).")
    sites: dict[str, str] | None = Field(
        None, description="With samples_per_s 'profile': site-name pattern (fnmatch: '*', '?', '[ab]') -> profile "
        "entry; the first pattern that matches a site wins, before node_type.")
    measured_model: Literal["study", "update_sized"] = Field(
        "study", description="With samples_per_s 'measured' or 'profile': the study's own model ('study') or a stand-in "
        "MLP whose parameters fill update_gb ('update_sized': how fast a model of the declared update size trains "
        "here; above 1 GB it is timed at 1 GB and scaled by the parameter count).")
    data_scale: float = Field(1.0, gt=0, description="Paper-scale samples each real training sample stands for: compute "
                              "time is charged for data_scale x the real samples (the real set is small; the paper's "
                              "is not). 1 = charge the real samples only.")

    @field_validator("samples_per_s")
    @classmethod
    def _positive_rate(cls, v: float | str) -> float | str:
        if not isinstance(v, str) and not v > 0:
            raise ValueError("must be > 0, 'measured' or 'profile'")
        return v

    @model_validator(mode="after")
    def _profile_fields(self) -> "FlCompute":
        if self.samples_per_s != "profile" and (self.node_type is not None or self.sites or self.profile != "default"):
            raise ValueError("profile, node_type and sites apply only with samples_per_s: profile")
        return self


class Federated(Strict):
    aggregator: str = Field(description="Site that averages the updates; every other site needs a link to it.")
    participants: list[str] | None = Field(None, description="Sites that hold data and may train (default: every "
                                                             "site but the aggregator).")
    data: FlData = Field(FlData(), description="The data set and how it is split between the participating sites.")
    training: FlTraining = Field(FlTraining(), description="The model and the local training each selected site runs per round.")
    compute: FlCompute = Field(description="How long local training takes at a site (declared or measured throughput, scaled by the site's capacity).")
    update_gb: float | None = Field(None, gt=0, le=1e9, description="Declared model-update size, GB, for round times and "
                                    "transfers (real state_dict + ballast). Default: the real serialized size.")
    round_time: RoundTime | list[RoundTime] = Field(
        ["straggler", "pooled"], description="straggler: max over selected sites of compute + comm (what synchronous FedAvg "
        "does); pooled: the paper's Eq. 7 on the same work, the selected sites' samples / summed capacity + max "
        "comm; pooled_eq7_as_written: Eq. 7 as the paper writes it, the whole training set / summed capacity + max "
        "comm. A list runs every policy (that names no round_time of its own) under each clock: the first keeps "
        "the policy's label, the others get '-<clock>' appended (powertrip, powertrip-pooled). Default: both "
        "straggler and pooled, so that every baseline is compared under both.")
    target_accuracy: float = Field(gt=0, le=1, description="Time-to-accuracy target (test accuracy).")
    time_to_accuracy: Literal["end_of_round", "interpolated"] = Field(
        "end_of_round", description="When a run reached the target: end_of_round: the end of the first round "
        "(evaluation) whose test accuracy reaches it (what a real system can know); interpolated: linearly "
        "inside that round between the accuracy before and after it (credits long rounds).")
    max_rounds: int = Field(200, ge=1, le=100000, description="Most rounds a policy runs (it stops earlier at target_accuracy or max_hours).")
    max_hours: float = Field(gt=0, description="Scenario time after which a policy stops.")
    rounds_after_target: int = Field(0, ge=0, description="Rounds to keep training after the target is reached.")
    grid_topup_kw: float = Field(0.0, ge=0, description="Grid power per site beyond its available-power trace.")
    emulated_transfers: bool = Field(True, description="On netns: send every selected site's update to the "
                                     "aggregator and the global model back over the shaped links (measured).")

    @property
    def clocks(self) -> list[str]:
        """The round-time clocks every policy runs under (``round_time`` as a list)."""
        return list(self.round_time) if isinstance(self.round_time, list) else [self.round_time]

    @field_validator("round_time")
    @classmethod
    def _clocks(cls, v):
        if isinstance(v, list) and (not v or len(set(v)) != len(v)):
            raise ValueError("give one clock or a non-empty list of distinct clocks")
        return v

    @model_validator(mode="after")
    def _distinct(self) -> "Federated":
        if self.participants is not None and len(set(self.participants)) != len(self.participants):
            raise ValueError("participants: duplicate site names")
        if self.compute.measured_model == "update_sized":
            if self.compute.samples_per_s not in ("measured", "profile"):
                raise ValueError("compute.measured_model: 'update_sized' only applies with samples_per_s: measured or profile")
            if self.update_gb is None:
                raise ValueError("compute.measured_model: 'update_sized' needs update_gb (the size to measure)")
        return self


SELECTION_POLICIES: KindRegistry[Kind] = KindRegistry(
    "selection policy", "name", base="testbed.federated.policies.base:SelectionPolicy")
"""Site-selection policies (the PowerTrip study) by name, each entry its model and its class (a
``SelectionPolicy`` subclass, built by ``from_spec(label, spec, aggregator)``). A built-in's model is
declared below with ``@selection_policy("testbed.federated.policies.<file>:<Class>")``; a plug-in's
file decorates its class with ``@testbed.federated.policies.register_selection_policy(ItsModel)``."""


def selection_policy(build: Hook):
    """Class decorator of a selection-policy model (a ``SelectionPolicyBase`` with ``name: Literal[...]``):
    register it with its class, or the ``"module:Class"`` that names it."""
    return SELECTION_POLICIES.declare(build)


class _FlBase(Strict):
    label: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Output name (default: name).")
    round_time: RoundTime | None = Field(None, description="Override federated.round_time for this policy.")

    def site_problems(self, where: str, participants: list[str], sites: set[str]) -> list[tuple[str, str]]:
        """(field path under ``where``, message) per reference this entry makes that the scenario's
        sites cannot meet; ``participants``: the sites that hold data. None by default."""
        return []


def _k_problems(where: str, ks: list[int], participants: list[str]) -> list[tuple[str, str]]:
    return [(f"{where}.k", f"{k} is more than the {len(participants)} participating sites")
            for k in ks if k > len(participants)]


@selection_policy("testbed.federated.policies.random:RandomPolicy")
class RandomK(_FlBase):
    name: Literal["random"] = Field(description="random: k sites chosen at random each round.")
    k: int = Field(ge=1, description="Sites drawn uniformly (seeded) among the usable ones, each round.")

    def site_problems(self, where, participants, sites):
        return _k_problems(where, [self.k], participants)


@selection_policy("testbed.federated.policies.static_k:StaticKPolicy")
class StaticK(_FlBase):
    name: Literal["static_k"] = Field(description="static_k: the same k highest-scoring sites every round (a list of k runs each and keeps the best).")
    k: int | list[int] = Field(description="Fixed number of sites (top-k by the power-to-cost score each round). "
                               "A list runs one policy per k (labels <label>-k<k>) and reports the best post hoc.")

    @model_validator(mode="after")
    def _ks(self) -> "StaticK":
        ks = self.k if isinstance(self.k, list) else [self.k]
        if not ks or any(k < 1 for k in ks) or len(set(ks)) != len(ks):
            raise ValueError("k: give a positive integer or a non-empty list of distinct positive integers")
        return self

    def site_problems(self, where, participants, sites):
        return _k_problems(where, self.k if isinstance(self.k, list) else [self.k], participants)


@selection_policy("testbed.federated.policies.fixed_radius:FixedRadiusPolicy")
class FixedRadius(_FlBase):
    name: Literal["fixed_radius"] = Field(description="fixed_radius: every site within a distance of the aggregator.")
    radius_miles: float = Field(1000.0, gt=0, description="Every usable site within this great-circle distance "
                                "of the aggregator.")


@selection_policy("testbed.federated.policies.centralized:CentralizedPolicy")
class Centralized(_FlBase):
    name: Literal["centralized"] = Field(description="centralized: one site trains on all the data (no federation).")
    site: str | None = Field(None, description="The one site that trains on all the data (default: the aggregator).")
    nodes: int | None = Field(None, ge=1, le=100000, description="Hardware nodes of that site for this baseline "
                              "(default: the site's own); its power trace still limits how many run.")
    lr: float | None = Field(None, gt=0, le=10, description="Learning rate of its SGD (default: federated.training.lr, "
                             "tuned for the sites' local training; sweep it to tune the centralized baseline).")

    def site_problems(self, where, participants, sites):
        return [] if self.site is None or self.site in sites else [(f"{where}.site", f"unknown site {self.site!r}")]


@selection_policy("testbed.federated.policies.powertrip:PowerTripPolicy")
class PowerTrip(_FlBase):
    name: Literal["powertrip"] = Field(description="powertrip: the PowerTrip policy, adapting k each round from power and communication scores.")
    k_init: int = Field(5, ge=1, description="Sites in the first round (the high-score core).")
    window: int = Field(5, ge=0, description="Candidate k in [k_cur - window, k_cur + window].")
    k_min: int = Field(1, ge=1, description="Fewest sites a round may select.")
    interval: int = Field(1, ge=1, description="Rounds between re-evaluations of k.")
    weight_ref_gb: float = Field(1.0, gt=0, description="Update size at which power and comm weigh equally: "
                                 "w_c = u / (u + weight_ref_gb), w_p = 1 - w_c.")
    acc_ceiling: float = Field(1.0, gt=0, le=1, description="A in ProjectAccuracyGain.")
    h_prior: float = Field(0.1, gt=0, description="h before any round is measured.")
    h_ewma: float = Field(0.5, gt=0, le=1, description="Weight of the newest measured h.")
    h_bounds: FloatPair = Field((0.001, 2.0), description="Clip for measured h.")
    gain: Literal["projected", "measured", "corrected"] = Field(
        "projected", description="projected: the gain formula with h calibrated per round; measured: the review's "
        "test, the last measured gain for every k (no k dependence); corrected: the formula's form fitted by least "
        "squares to the measured gains of the last correction_window rounds (projected until two distinct k).")
    correction_window: int = Field(10, ge=2, le=1000, description="Trained rounds the corrected gain is fitted on.")
    patience: int = Field(0, ge=0, description="Hold k while accuracy improves: re-evaluate k only after this many "
                          "rounds in a row without a new best accuracy (0: every interval).")

    def site_problems(self, where, participants, sites):
        if self.k_init > len(participants):
            return [(f"{where}.k_init", f"more than the {len(participants)} participating sites")]
        return []


SelectionPolicyBase = _FlBase
"""The base of a selection policy's model: ``label`` and ``round_time`` come with it."""
