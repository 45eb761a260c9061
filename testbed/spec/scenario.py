"""The scenario: everything one ``testbed run`` needs, validated at load time."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from testbed import io_model, node_kinds
from testbed.power import backends as power_backends
from testbed.power import builtin as _power_builtins  # noqa: F401  registers the built-in backends power.backend names
from testbed.spec.cross_traffic import LOAD_PRESETS, CrossTraffic, preset_entries
from testbed.spec.federated import Federated
from testbed.spec.grid_signals import GRID_SIGNALS, Battery
from testbed.spec.images import ImageSource
from testbed.spec import carbon_policy  # noqa: F401  registers the carbon_aware policy's model
from testbed.spec.limits import Limits
from testbed.spec.federated import SELECTION_POLICIES
from testbed.spec.policies import (MIGRATION_POLICIES, FeasibilityModel, FeasibilityOverrides, PolicySpec,
                                   policy_label)
from testbed.spec.base import Strict
from testbed.spec.topology import BUILTIN_NODE_TYPES, Link, NodeType, Site
from testbed.spec.trace_sources import TRACE_KINDS, Traces
from testbed.spec.union import rebuild_on_change
from testbed.spec.workloads import Workloads


CrossTrafficLevel = Literal[tuple(LOAD_PRESETS)]  # type: ignore[valid-type]


class Emulation(Strict):
    """Ignored by the sim substrate; recorded in the manifest."""

    time_scale: float = Field(1.0, gt=0, description="Scenario seconds per wall second.")
    byte_scale: float | Literal["auto"] = Field("auto", description="Bytes sent per scenario byte.")
    runtime: node_kinds.RuntimeName = Field(node_kinds.DEFAULT_RUNTIME, description="Where node agents run (testbed.node_kinds): process (a plain process in the site's namespace), docker (a container), or a registered node runtime.")
    image: ImageSource | None = Field(None, description="Your own container image for every site (runtime docker): {dockerfile: PATH} built locally, or {tar: PATH} loaded; paths relative to the scenario file (README, Your own container per site).")
    site_images: dict[str, ImageSource] = Field(default_factory=dict, description="Per-site images by site name, replacing 'image' at those sites.")
    switch: Literal["lxbr", "ovs"] = Field("lxbr", description="The management switch of the mininet substrate (ignored by netns): lxbr (a Linux bridge) or ovs (Open vSwitch: the system's where its database answers, else a private one for the run; its userspace datapath where the kernel has no openvswitch module).")
    tcp_congestion: str = Field("cubic", pattern=r"^[a-z0-9_]{1,15}$", description=(
        "The TCP congestion control of every site's stack (each site namespace's default; the sender's decides): "
        "cubic (Linux's default), bbr, reno, any other this kernel has loaded, or host (this machine's default, "
        "which differs between machines). Recorded in the manifest."))
    require_latency: bool = Field(True, description="Fail when link latency, jitter or loss cannot be emulated (no netem and no delay relay) instead of running without it.")
    nodes: str = Field(
        "ballast", json_schema_extra=node_kinds.schema_choices,
        description="What runs at the sites (testbed.node_kinds): ballast: migrations move seeded ballast of the "
        "checkpoint's scaled size; agents: a node agent per site trains a real PyTorch job and migrations move "
        "its real checkpoint (+ ballast); or a registered kind.",
    )
    steps_per_s: float = Field(2.0, gt=0, le=1000, description="Pace of real training per job (agents).")
    model_mb: float | None = Field(None, gt=0, le=100_000, description=(
        "Grow each agent's stand-in model to this many MB of parameters, so its checkpoint (about 3x with "
        "Adam's moments) is real state of that size, sent whole (ballast only pads it up to the scaled size); "
        "default: the stand-in's own size (agents)."))

    @field_validator("nodes")
    @classmethod
    def _registered(cls, v: str) -> str:
        return node_kinds.check_live(v)

    @field_validator("byte_scale")
    @classmethod
    def _positive(cls, v: float | str) -> float | str:
        if not isinstance(v, str) and not 0 < v <= 1:
            raise ValueError("must be 'auto' or in (0, 1]")
        return v

    @model_validator(mode="after")
    def _runtime_fits_nodes(self) -> "Emulation":
        node_kinds.check_runtime(self.nodes, self.runtime)
        return self


class SubstrateSettings(Strict):
    """The analytic substrate's model of *reality* (not of the controller's prediction)."""

    protocol_efficiency: float = Field(
        1448 / 1514, gt=0, le=1, description="TCP goodput / line rate (MTU 1500: 1448/1514)."
    )
    slow_start: bool = Field(True, description="Add handshake + slow-start ramp from the link RTT.")
    io_model: str = Field(io_model.MEASURED, min_length=1, max_length=4096, description=(
        "The true time of a migration's checkpoint write (at the source, before the transfer) and load (at the "
        "destination), as a function of the checkpoint's size: measured (the calibration shipped with testbed, "
        "testbed/data/io-model.json: per phase a line fitted to timed torch save / cold load, times a lognormal "
        "factor with the points' relative spread, drawn per migration from the run's seed), constant (t_load_s, "
        "no checkpoint write: the paper's arithmetic as the truth), or the PATH of a .json that `testbed calibrate "
        "load --out PATH` wrote (relative to the scenario file). Downtime is t_downtime_s in every case. The "
        "prediction (feasibility:) does not change."))
    t_load_s: float = Field(10.3, ge=0, description="True load time at the destination (io_model: constant only).")
    t_downtime_s: float = Field(0.4, ge=0, description="True pause-to-resume overhead (every io_model: no calibration measures it).")

    @field_validator("io_model")
    @classmethod
    def _io_model_choice(cls, v: str) -> str:
        if v in (io_model.MEASURED, io_model.CONSTANT) or v.lower().endswith(".json"):
            return v
        from testbed.suggest import did_you_mean

        raise ValueError(f"must be {io_model.MEASURED!r}, {io_model.CONSTANT!r} or the path of a .json file "
                         f"written by testbed calibrate load"
                         f"{did_you_mean(v, [io_model.MEASURED, io_model.CONSTANT])}")


class Power(Strict):
    backend: str = Field(
        power_backends.AUTO, json_schema_extra=power_backends.schema_choices,
        description="Who enforces the GPU caps (testbed.power.backends): auto (the profile model, or "
        "the real CPU throttle of agent training), model, emulated-throttle, nvml (real GPUs), or a registered one.",
    )
    p_sys_kw: float = Field(1.8, gt=0, description="System power during a transfer (Eq. 2 of the migration paper), split between both ends.")
    grid_limit_kw: float | None = Field(
        None, ge=0,
        description="Grid top-up a site can draw beyond its renewables (None = unlimited), enforced: running "
        "jobs are power-capped and slow down as their power profile says; when even the lowest cap does not fit, "
        "the most recently started jobs wait (no progress) until it does.",
    )

    @field_validator("backend")
    @classmethod
    def _registered(cls, v: str) -> str:
        return power_backends.check_name(v)


class Scenario(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="Name of the scenario; results go to results/<name>-s<seed>-<time>/ by default.")
    description: str = Field("", description="Free text, shown nowhere but kept in the results' manifest.")
    plugins: list[str] = Field(default_factory=list, description=(
        "Modules (my_lab.traces) or .py files (relative to this file) imported before the scenario is validated, so "
        "that what they register (a policy, a trace kind, a grid signal, a power backend, a substrate, a kind of "
        "nodes, a workload) can be named in this file (docs/how-to/plugins.md)."))
    seed: int = Field(0, ge=0, description="Seed every random stream of the run derives from (traces, arrivals, forecasts); `--seed` replaces it.")
    start: datetime = Field(
        datetime(2024, 6, 3, tzinfo=timezone.utc), strict=False,
        description="Absolute start (aligns solar and real traces).",
    )
    duration_h: float = Field(gt=0, le=24 * 366, description="Length of the run in scenario hours.")
    step_s: float = Field(300.0, ge=1, le=3600, description="Control and trace step in seconds: the policies decide and the traces change once per step.")
    emulation: Emulation = Field(Emulation(), description="How the emulated substrates (netns, mininet) scale time and bytes; ignored by sim.")
    substrate: SubstrateSettings = Field(SubstrateSettings(), description="The sim substrate's model of what really happens to a transfer (not what the policies predict).")
    topology: str | None = Field(None, description="Topology file; alternative to inline sites/links.")
    node_types: dict[str, NodeType] = Field(default_factory=dict, description="Extra or replacement node types by name (power draw, speed, power profile), beside the built-in ones.")
    sites: list[Site] = Field(default_factory=list, description="The sites (micro-datacenters) of the scenario, inline; or name a topology file instead.")
    links: list[Link] = Field(default_factory=list, description="Wide-area links between sites, inline; or name a topology file instead.")
    traces: Traces = Field(description="Where the renewable power, bandwidth and forecast series come from.")
    cross_traffic: list[CrossTraffic] | CrossTrafficLevel = Field(default_factory=list, description=(
        "Background traffic per link direction while the run goes (docs/how-to/cross-traffic.md): TCP flows, UDP "
        "at a rate, on/off and Poisson flows with Pareto sizes, or a CSV trace; real traffic from the sites' "
        "namespaces on netns and mininet, the fair share it leaves a transfer on sim. Or a load level on every "
        "direction of every link, B its bandwidth: " + "; ".join(f"{k}: {v}" for k, v in LOAD_PRESETS.items())
        + " (read as the list of entries it stands for)."))
    workloads: Workloads | None = Field(None, description="Jobs (migration study); absent in a federated scenario.")
    federated: Federated | None = Field(None, description="Synchronous FedAvg site selection (PowerTrip study).")
    power: Power = Field(Power(), description="Who enforces GPU power caps, transfer power (Eq. 2) and the grid top-up per site.")
    batteries: dict[str, Battery] = Field(default_factory=dict, description="Site batteries by site name, or 'default' for every site not named (none: no battery).")
    feasibility: FeasibilityModel = Field(FeasibilityModel(), description="The reference feasibility model (Eq. 1 / Eq. 2) recorded for every migration and the default of every policy's own parameters.")
    policies: list[PolicySpec] = Field(min_length=1, description="The policies to compare, each run on identical inputs: a name, or a mapping with name, parameters and an optional label.")
    limits: Limits = Field(default_factory=Limits, description="Bounds on the work a run may ask for (docs/reference/scenario-files.md, Validation and limits).")

    @field_validator("start")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("must carry a time zone, e.g. 2024-06-03T00:00:00Z")
        return v

    @field_validator("cross_traffic", mode="before")
    @classmethod
    def _load_level_to_entries(cls, v: object, info: ValidationInfo) -> object:
        """A named load level stands for its entries on every direction of every link (declared before)."""
        if not isinstance(v, str):
            return v
        if v not in LOAD_PRESETS:
            raise ValueError(f"unknown load level {v!r} (give a list of entries, or one of: {', '.join(LOAD_PRESETS)})")
        links = info.data.get("links")
        if links is None:  # the links are invalid: that is reported on its own
            return []
        if not links and v != "none":
            raise ValueError(f"load level {v!r} puts traffic on every link, and the scenario has no links")
        return preset_entries(v, links)

    @field_validator("policies", mode="before")
    @classmethod
    def _names_to_entries(cls, v: object) -> object:
        if isinstance(v, (str, dict)):
            v = [v]
        if isinstance(v, list):
            return [{"name": p} if isinstance(p, str) else p for p in v]
        return v

    @field_validator("policies")
    @classmethod
    def _policy_models_default_to_the_scenarios(cls, v: list, info: ValidationInfo) -> list:
        """One model: a policy's unset Eq. 1 / Eq. 2 parameters are the scenario's ``feasibility``."""
        model = info.data.get("feasibility")
        if not isinstance(model, FeasibilityModel):  # invalid: its own error says why
            return v
        return [p.with_scenario_model(model) if isinstance(p, FeasibilityOverrides) else p for p in v]

    @model_validator(mode="after")
    def _one_study(self) -> "Scenario":
        if (self.workloads is None) == (self.federated is None):
            raise ValueError("give either 'workloads' (migration study) or 'federated' (site selection), not both or neither")
        return self

    @model_validator(mode="after")
    def _unique_labels(self) -> "Scenario":
        labels = [policy_label(p) for p in self.policies]
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise ValueError(f"policies: labels must be unique; give 'label:' to repeated {dup}")
        return self

    @property
    def duration_s(self) -> float:
        return self.duration_h * 3600.0

    def all_node_types(self) -> dict[str, NodeType]:
        return {**BUILTIN_NODE_TYPES, **self.node_types}

    def site(self, name: str) -> Site:
        for s in self.sites:
            if s.name == name:
                return s
        raise KeyError(name)

    def node_type_of(self, site: str) -> NodeType:
        return self.all_node_types()[self.site(site).node_type]

    def grid_limit_kw(self, site: str) -> float | None:
        s = self.site(site)
        return s.grid_limit_kw if s.grid_limit_kw is not None else self.power.grid_limit_kw

    def battery(self, site: str) -> Battery | None:
        return self.batteries.get(site) or self.batteries.get("default")

    def link_between(self, a: str, b: str) -> Link | None:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        return None


# a policy or trace kind registered after this point (a plug-in module) joins the unions here
rebuild_on_change([Scenario], MIGRATION_POLICIES, SELECTION_POLICIES, TRACE_KINDS, GRID_SIGNALS)
