"""Compute profiles: training samples per second of one node of a type, with where the number comes from.

A federated scenario with ``federated.compute.samples_per_s: profile`` takes each participating
site's compute speed from a profile file (``federated.compute.profile``: a path relative to the
scenario, default the one shipped with testbed, ``testbed/data/compute-profile.json``). The
profile's ``entries`` name node types (``h100-sxm``, ``cpu-1thread``, ...); each entry gives the
samples per second one such node trains at full power:

- ``study_samples_per_s``: the study's own model (the one FedAvg trains; the entry's ``model``
  says which configuration was timed), used with ``compute.measured_model: study``;
- ``gb_samples_per_s``: an MLP whose float32 parameters fill 1 GB (the update-sized stand-in of
  :mod:`testbed.federated.throughput`), used with ``measured_model: update_sized``; a scenario whose
  update is ``u`` GB gets ``gb_samples_per_s / u`` (training FLOPs per sample grow with the
  parameter count).

and its ``basis``, which says how honest the number is:

- ``measured``: timed by ``testbed calibrate compute`` (``measured`` holds the command, date,
  machine, device and torch version);
- ``published``: a figure from a paper or vendor (``sources`` names it);
- ``cpu_scaled``: another entry's numbers (``scaled_from``, a measured or published one) times
  ``ratio``; ``ratio_derivation`` says where the ratio comes from (e.g. the two devices' spec-sheet
  FP32 peak throughput), ``sources`` where its figures come from. A peak-FLOPS ratio is an upper
  bound for small models, which do not fill a GPU.

Which entry a site uses: ``compute.sites`` (site-name patterns, ``fnmatch`` style, first match wins),
else ``compute.node_type``, else the site's own ``node_type`` from the topology. The site's
reference-node rate is then the entry's rate divided by the site's node-type ``speed`` (a site's
capacity counts reference nodes: ``nodes x speed x throughput fraction at its cap``), so its compute
time is ``E x n_i x data_scale / (rate x nodes x throughput fraction)``.

Errors name the field and the file, never quote its content (like ``testbed/io_model.py``).
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from testbed.bounded_read import read_bounded
from testbed.errors import SpecError

FORMAT = "testbed-compute-profile/1"
SHIPPED = "data/compute-profile.json"  # inside the testbed package
DEFAULT = "default"
"""``federated.compute.profile`` value (and its default): the shipped profile."""
MAX_FILE_BYTES = 1 << 20
MAX_ENTRIES = 1000
ENTRY_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MODELS = ("study", "update_sized")


class ComputeProfileError(SpecError):
    """A compute profile cannot be read or used. Names the file and the field, never quotes content."""

    def __init__(self, where: str, message: str):
        super().__init__([(where, message)])
        self.where, self.message = where, message

    def __reduce__(self):  # crosses process boundaries (sweep workers) intact
        return ComputeProfileError, (self.where, self.message)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Measurement(_Strict):
    """How a ``measured`` entry was measured (written by ``testbed calibrate compute``)."""

    command: str = Field(min_length=1, max_length=2000)
    date_utc: str = Field(min_length=1, max_length=64)
    device: str = Field(min_length=1, max_length=200, description="cpu (one thread, CPU time) or the CUDA device's name")
    timing: str = Field(min_length=1, max_length=500, description="what was timed and with which clock")
    machine: dict[str, str | int | float] = Field(default_factory=dict)
    torch: str = Field("", max_length=64)


class Entry(_Strict):
    basis: Literal["measured", "published", "cpu_scaled"]
    description: str = Field("", max_length=500)
    study_samples_per_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    gb_samples_per_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    model: str = Field("", max_length=500, description="the configuration study_samples_per_s was timed with")
    measured: Measurement | None = None
    sources: list[str] = Field(default_factory=list, max_length=20)
    scaled_from: str | None = Field(None, pattern=ENTRY_NAME)
    ratio: float | None = Field(None, gt=0, allow_inf_nan=False)
    ratio_derivation: str = Field("", max_length=2000)

    @model_validator(mode="after")
    def _basis(self) -> "Entry":
        if self.basis == "cpu_scaled":
            if self.scaled_from is None or self.ratio is None:
                raise ValueError("a cpu_scaled entry needs scaled_from and ratio")
            if not self.ratio_derivation.strip():
                raise ValueError("a cpu_scaled entry needs ratio_derivation (where the ratio comes from)")
            if self.study_samples_per_s is not None or self.gb_samples_per_s is not None:
                raise ValueError("a cpu_scaled entry takes its rates from scaled_from x ratio: give no rates")
        else:
            if self.scaled_from is not None or self.ratio is not None:
                raise ValueError(f"scaled_from and ratio belong to cpu_scaled entries, not {self.basis}")
            if self.study_samples_per_s is None and self.gb_samples_per_s is None:
                raise ValueError("give study_samples_per_s or gb_samples_per_s (or both)")
        if self.basis == "measured" and self.measured is None:
            raise ValueError("a measured entry needs measured (command, date_utc, device, timing)")
        if self.basis == "published" and not self.sources:
            raise ValueError("a published entry needs sources (where the figure is published)")
        return self


class ProfileFile(_Strict):
    format: Literal["testbed-compute-profile/1"]
    description: str = Field("", max_length=2000)
    entries: dict[str, Entry] = Field(min_length=1, max_length=MAX_ENTRIES)

    @field_validator("entries")
    @classmethod
    def _names(cls, v: dict[str, Entry]) -> dict[str, Entry]:
        import re

        for name in v:
            if not re.fullmatch(ENTRY_NAME, name):
                raise ValueError("entry names: letters, digits, '_', '.', '-' (at most 64)")
        return v

    @model_validator(mode="after")
    def _scaled(self) -> "ProfileFile":
        for name, e in self.entries.items():
            if e.basis != "cpu_scaled":
                continue
            base = self.entries.get(e.scaled_from)
            if base is None:
                raise ValueError(f"entries.{name}.scaled_from: no entry {e.scaled_from!r} in this profile")
            if base.basis == "cpu_scaled":
                raise ValueError(f"entries.{name}.scaled_from: scale a measured or published entry, not a scaled one")
        return self


@dataclass(frozen=True)
class Rate:
    """One entry's samples/s for one model, and a line saying where it comes from."""

    entry: str
    basis: str
    samples_per_s: float
    provenance: str


@dataclass(frozen=True)
class ComputeProfile:
    file: ProfileFile
    source: str   # the file it was read from (shown in manifests)
    sha256: str

    @property
    def entries(self) -> dict[str, Entry]:
        return self.file.entries

    def rate(self, entry: str, model: str, update_gb: float | None = None, *, where: str = "entry") -> Rate:
        """Samples per second of one ``entry`` node at full power for ``model`` (``study`` or
        ``update_sized``, the latter for an update of ``update_gb`` GB)."""
        e = self.entries.get(entry)
        if e is None:
            raise ComputeProfileError(where, f"no entry {entry!r} in the compute profile {self.source} "
                                             f"(it has: {', '.join(sorted(self.entries))})")
        base, factor = (self.entries[e.scaled_from], e.ratio) if e.basis == "cpu_scaled" else (e, 1.0)
        if model == "study":
            value, what = base.study_samples_per_s, "the study's model"
        elif model == "update_sized":
            if update_gb is None or not update_gb > 0:
                raise ComputeProfileError(where, "measured_model update_sized needs federated.update_gb")
            value = None if base.gb_samples_per_s is None else base.gb_samples_per_s / update_gb
            what = f"a {update_gb:g} GB-update-sized MLP (1 GB rate / {update_gb:g})"
        else:
            raise ValueError(f"unknown model {model!r}")
        field = "study_samples_per_s" if model == "study" else "gb_samples_per_s"
        if value is None:
            src = entry if e.basis != "cpu_scaled" else f"{entry} (scaled from {e.scaled_from})"
            raise ComputeProfileError(where, f"entry {src} of the compute profile {self.source} has no {field} "
                                             f"(needed by measured_model {model})")
        rate = value * factor
        if e.basis == "cpu_scaled":
            prov = (f"{entry}: cpu_scaled, {e.scaled_from} ({base.basis}) {value:.4g} samples/s x ratio {factor:g} "
                    f"for {what}; ratio: {e.ratio_derivation}")
        elif e.basis == "measured":
            m = e.measured
            prov = f"{entry}: measured {m.date_utc} on {m.device} ({m.timing}) for {what}: {rate:.4g} samples/s"
        else:
            prov = f"{entry}: published ({'; '.join(e.sources)}) for {what}: {rate:.4g} samples/s"
        return Rate(entry, e.basis, rate, prov)


def _where(path_shown: str, loc: tuple) -> str:
    return ".".join([path_shown, *(str(x) for x in loc)]) if loc else path_shown


def profile_from_bytes(raw: bytes, *, where: str, source: str) -> ComputeProfile:
    """Parse and validate; ComputeProfileError naming ``where`` (the file) and the field."""
    import hashlib

    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        line = f" (line {e.lineno})" if isinstance(e, json.JSONDecodeError) else ""
        raise ComputeProfileError(where, f"is not a JSON file{line}") from None
    if not isinstance(data, dict):
        raise ComputeProfileError(where, "is not a compute profile (a JSON object with format and entries)")
    if data.get("format") != FORMAT:
        raise ComputeProfileError(f"{where}: format", f"expected {FORMAT!r}")
    try:
        pf = ProfileFile.model_validate(data)
    except ValidationError as e:
        err = e.errors(include_input=False, include_url=False)[0]
        msg = err["msg"].removeprefix("Value error, ")
        raise ComputeProfileError(f"{where}: {_where('', err['loc']).lstrip('.') or 'profile'}", msg) from None
    return ComputeProfile(pf, source, hashlib.sha256(raw).hexdigest())


def load_profile(path: str | Path) -> ComputeProfile:
    path = Path(path)
    raw = read_bounded(path, MAX_FILE_BYTES, "a compute profile", ComputeProfileError)
    return profile_from_bytes(raw, where=str(path), source=str(path.resolve()))


def shipped_bytes() -> bytes:
    res = resources.files("testbed").joinpath(SHIPPED)
    if not res.is_file():
        raise ComputeProfileError(f"testbed/{SHIPPED}", "the shipped compute profile is missing from this installation")
    return res.read_bytes()


def default_profile() -> ComputeProfile:
    """The profile shipped with testbed (``testbed/data/compute-profile.json``)."""
    where = f"testbed/{SHIPPED}"
    return profile_from_bytes(shipped_bytes(), where=where, source=where)


def open_profile(value: str | None) -> ComputeProfile:
    """``default`` / None: the shipped profile; else a file (already resolved against the scenario)."""
    return default_profile() if value in (None, DEFAULT) else load_profile(value)


@dataclass(frozen=True)
class SiteRate:
    """A participating site's speed: the entry, its per-node rate and the site's reference-node rate."""

    site: str
    entry: str
    basis: str
    node_samples_per_s: float        # one node of the entry's type at full power
    reference_samples_per_s: float   # per reference node of capacity (node rate / node-type speed)
    chosen_by: str                   # compute.sites[<pattern>] | compute.node_type | the topology's node_type
    provenance: str


def entry_for(site: str, topology_node_type: str, compute) -> tuple[str, str]:
    """(entry name, which field chose it) for ``site`` under ``compute`` (a FlCompute)."""
    for pattern, entry in (compute.sites or {}).items():
        if fnmatch.fnmatchcase(site, pattern):
            return entry, f"federated.compute.sites[{pattern}]"
    if compute.node_type is not None:
        return compute.node_type, "federated.compute.node_type"
    return topology_node_type, f"the site's node_type ({topology_node_type})"


def training_sites(scenario) -> list[str]:
    """The sites that may train: the participants, the aggregator and every centralized baseline's site."""
    from testbed.spec.federated_checks import participants

    fl = scenario.federated
    out = list(participants(scenario)) + [fl.aggregator]
    out += [p.site for p in scenario.policies if getattr(p, "name", None) == "centralized" and p.site]
    return list(dict.fromkeys(out))


def resolve_sites(profile: ComputeProfile, scenario, sites: list[str]) -> dict[str, SiteRate]:
    """Every site's rate from the profile; ComputeProfileError naming the field that chose a missing entry."""
    fl = scenario.federated
    c = fl.compute
    out = {}
    for s in sites:
        site = scenario.site(s)
        entry, chosen = entry_for(s, site.node_type, c)
        field = chosen if chosen.startswith("federated.") else f"sites[{s}].node_type"
        r = profile.rate(entry, c.measured_model, fl.update_gb, where=f"{field} (site {s})")
        speed = scenario.node_type_of(s).speed
        out[s] = SiteRate(s, entry, r.basis, r.samples_per_s, r.samples_per_s / speed, chosen, r.provenance)
    return out


def check_scenario(scenario, base_dir: Path, sites: list[str]) -> tuple[str | None, list[tuple[str, str]]]:
    """Load-time check of a scenario with ``samples_per_s: profile``: (the profile path resolved
    against the scenario, or None for the shipped one; problems naming the field and file)."""
    from testbed.spec.files import input_file_problem, resolve_file

    c = scenario.federated.compute
    field = "federated.compute.profile"
    resolved = None
    if c.profile not in (None, DEFAULT):
        path = resolve_file(c.profile, base_dir)
        if path is None:
            return None, [(field, f"file not found: {c.profile}")]
        why = input_file_problem(path, MAX_FILE_BYTES)
        if why is not None:
            return None, [(field, f"{path}: {why}")]
        resolved = str(path)
    try:
        prof = open_profile(resolved)
    except ComputeProfileError as e:
        return None, [(field, f"{w}: {m}") for w, m in e.problems]
    if c.samples_per_s != "profile":
        return resolved, []
    try:
        resolve_sites(prof, scenario, sites)
    except ComputeProfileError as e:
        return None, list(e.problems)
    return resolved, []


def describe_sites(rates: dict[str, SiteRate]) -> str:
    """One line: which entries gave the sites' speeds (for summaries)."""
    by: dict[tuple[str, str], list[str]] = {}
    for r in rates.values():
        by.setdefault((r.entry, r.basis), []).append(r.site)
    return "; ".join(f"{e} ({b}): {len(s)} site{'s' if len(s) != 1 else ''}" for (e, b), s in sorted(by.items()))


def mean_rate(rates: dict[str, SiteRate]) -> float:
    vals = [r.node_samples_per_s for r in rates.values()]
    return math.fsum(vals) / len(vals) if vals else math.nan
