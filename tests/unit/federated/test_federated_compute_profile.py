"""federated.compute.samples_per_s: profile: each site's speed from a compute-profile entry, with provenance."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.errors import SpecError
from testbed.spec.compute_profile import (
    ComputeProfileError, default_profile, load_profile, resolve_sites, training_sites,
)
from testbed.federated.roundtime import RoundTimeModel, SiteTime
from testbed.runner import run_scenario
from testbed.spec.load import LoadedScenario, load_scenario, scenario_from_dict
from tests.unit.federated_support import tiny, tiny_scenario

PROFILE = {
    "format": "testbed-compute-profile/1",
    "entries": {
        "base": {"basis": "measured", "study_samples_per_s": 100.0, "gb_samples_per_s": 8.0,
                 "measured": {"command": "testbed calibrate compute", "date_utc": "2026-12-05T00:00:00Z",
                              "device": "cpu", "timing": "CPU time of one thread"}},
        "fast": {"basis": "cpu_scaled", "scaled_from": "base", "ratio": 10.0,
                 "ratio_derivation": "spec-sheet FP32 peak of the GPU / one CPU thread's"},
        "paper": {"basis": "published", "study_samples_per_s": 50.0, "sources": ["a paper, Table 2"]},
    },
}


def write(tmp_path: Path, data, name="profile.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


def profile_compute(path, **kw):
    return {"samples_per_s": "profile", "profile": str(path), "data_scale": 10, **kw}


def test_the_shipped_profile_loads_and_every_entry_has_a_rate_and_its_basis():
    prof = default_profile()
    assert prof.entries["cpu-1thread"].basis == "measured" and prof.entries["cpu-1thread"].measured is not None
    for name, e in prof.entries.items():
        r = prof.rate(name, "update_sized", 1.0)
        assert r.samples_per_s > 0 and r.basis == e.basis
        if e.basis == "cpu_scaled":
            assert e.ratio_derivation and e.sources and "x ratio" in r.provenance


def test_cpu_scaled_is_the_base_times_the_ratio_and_update_sized_scales_with_the_size(tmp_path):
    prof = load_profile(write(tmp_path, PROFILE))
    assert prof.rate("fast", "study").samples_per_s == pytest.approx(1000.0)
    assert prof.rate("fast", "update_sized", 2.0).samples_per_s == pytest.approx(40.0)
    assert "spec-sheet FP32" in prof.rate("fast", "study").provenance
    with pytest.raises(ComputeProfileError, match="gb_samples_per_s"):
        prof.rate("paper", "update_sized", 1.0)  # a published entry with no 1 GB rate


def test_sites_resolve_by_pattern_then_node_type_then_topology(tmp_path):
    path = write(tmp_path, PROFILE)
    prof = load_profile(path)
    sc = tiny_scenario(compute=profile_compute(path, node_type="base", sites={"n*": "fast", "far": "paper"}))
    rates = resolve_sites(prof, sc, training_sites(sc))
    assert set(rates) == {"near", "mid", "far", "tiny", "agg"}
    assert (rates["near"].entry, rates["near"].chosen_by) == ("fast", "federated.compute.sites[n*]")
    assert rates["far"].entry == "paper" and rates["far"].basis == "published"
    assert rates["mid"].entry == "base" and rates["mid"].chosen_by == "federated.compute.node_type"
    # per reference node: the node's rate / the node type's speed (a100-server 1.6, rtx4090-minipc 1.0)
    assert rates["near"].reference_samples_per_s == pytest.approx(1000.0 / 1.6)
    assert rates["mid"].reference_samples_per_s == pytest.approx(100.0)


def test_without_node_type_the_topology_node_type_names_the_entry(tmp_path):
    data = copy.deepcopy(PROFILE)
    for nt in ("a100-server", "rtx4090-minipc", "jetson-thor"):
        data["entries"][nt] = {"basis": "published", "study_samples_per_s": 7.0, "sources": ["x"]}
    path = write(tmp_path, data)
    sc = tiny_scenario(compute=profile_compute(path))
    rates = resolve_sites(load_profile(path), sc, training_sites(sc))
    assert rates["tiny"].entry == "jetson-thor" and rates["tiny"].chosen_by.startswith("the site's node_type")


def test_an_unknown_entry_names_the_field_and_the_file(tmp_path):
    path = write(tmp_path, PROFILE)
    with pytest.raises(SpecError) as e:
        tiny_scenario(compute=profile_compute(path, node_type="nosuch"))
    text = str(e.value)
    assert "federated.compute.node_type" in text and "nosuch" in text and str(path) in text
    with pytest.raises(SpecError, match=r"sites\[.*\]\.node_type"):  # no node_type: the topology's, not in it
        tiny_scenario(compute=profile_compute(path))


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["entries"]["base"].pop("measured"), "entries.base"),
    (lambda d: d["entries"]["fast"].pop("ratio_derivation"), "entries.fast"),
    (lambda d: d["entries"]["fast"].update(scaled_from="ghost"), "scaled_from"),
    (lambda d: d["entries"]["paper"].update(study_samples_per_s=-1), "entries.paper.study_samples_per_s"),
    (lambda d: d["entries"]["paper"].pop("sources"), "entries.paper"),
    (lambda d: d.update(format="other/1"), "format"),
    (lambda d: d["entries"]["base"].update(colour="zzq-secret-zzq"), "entries.base.colour"),
])
def test_a_bad_profile_names_the_file_and_the_field_never_its_content(tmp_path, mutate, field):
    data = copy.deepcopy(PROFILE)
    mutate(data)
    path = write(tmp_path, data)
    with pytest.raises(ComputeProfileError) as e:
        load_profile(path)
    text = str(e.value)
    assert str(path) in text and field in text and "zzq-secret" not in text


@pytest.mark.parametrize("content,why", [("{not json", "not a JSON file"), ("[1, 2]", "not a compute profile")])
def test_a_file_that_is_not_a_profile_is_refused(tmp_path, content, why):
    with pytest.raises(ComputeProfileError, match=why):
        load_profile(write(tmp_path, content))


def test_profile_fields_without_profile_mode_are_refused():
    with pytest.raises(SpecError, match="samples_per_s: profile"):
        tiny_scenario(compute={"samples_per_s": 20, "node_type": "h100-sxm"})


def test_the_profile_path_is_relative_to_the_scenario_and_validate_exits_2_on_a_missing_file(tmp_path, capsys):
    sub = tmp_path / "sc"
    sub.mkdir()
    write(sub, PROFILE, "p.json")
    d = tiny(compute=profile_compute("p.json", node_type="base"))
    (sub / "s.yaml").write_text(yaml.safe_dump(d))
    sc = load_scenario(sub / "s.yaml").scenario
    assert sc.federated.compute.profile == str((sub / "p.json").resolve())
    d["federated"]["compute"]["profile"] = "missing.json"
    (sub / "bad.yaml").write_text(yaml.safe_dump(d))
    assert main(["validate", str(sub / "bad.yaml")]) == 2
    err = capsys.readouterr().err
    assert "federated.compute.profile" in err and "missing.json" in err and "Traceback" not in err


def test_per_site_rates_set_compute_and_the_pooled_clock():
    m = RoundTimeModel("pooled", 1, 1.0, 10.0, 100)
    assert m.site_compute_s(100, 2.0) == pytest.approx(5.0)
    assert m.site_compute_s(100, 2.0, rate=50.0) == pytest.approx(1.0)
    plain = [SiteTime("a", 60, 1.0, 0, 1, 1), SiteTime("b", 40, 1.0, 0, 2, 2)]
    fast = [SiteTime("a", 60, 1.0, 0, 1, 1, 30.0), SiteTime("b", 40, 1.0, 0, 2, 2, 10.0)]
    assert m.round_s(plain) == pytest.approx(100 / 20.0 + 4)
    assert m.round_s(fast) == pytest.approx(100 / 40.0 + 4)  # samples / (30 x 1 + 10 x 1) samples/s
    assert m.centralized_s(2.0, epochs=1, rate=100.0) == pytest.approx(0.5)


def test_a_run_records_each_sites_entry_basis_and_compute_vs_comm(tmp_path):
    path = write(tmp_path, PROFILE)
    d = tiny(compute=profile_compute(path, node_type="base", sites={"far": "fast"}))
    d["policies"] = [{"name": "static_k", "k": 3}, "centralized"]
    sc = scenario_from_dict(d)
    loaded = LoadedScenario(scenario=sc, path=Path("tiny.yaml"), text="name: fl-tiny\n", sha256="0" * 64,
                            topology_path=None)
    out = run_scenario(loaded, out_dir=tmp_path / "r", substrate="sim", progress=False, plots=False)
    man = json.loads((out / "manifest.json").read_text())["substrate"]["compute_profile"]
    assert man["file"] == str(path.resolve()) and man["model"] == "study"
    assert man["sites"]["far"]["entry"] == "fast" and man["sites"]["far"]["basis"] == "cpu_scaled"
    assert man["sites"]["mid"]["entry"] == "base" and "measured" in man["sites"]["mid"]["provenance"]
    s = json.loads((out / "static_k" / "summary.json").read_text())
    assert s["compute_profile"] == "base (measured): 4 sites; fast (cpu_scaled): 1 site"
    assert s["mean_compute_s"] > 0 and s["mean_comm_s"] > 0
    assert s["compute_over_comm"] == pytest.approx(s["mean_compute_s"] / s["mean_comm_s"])
    sites = __import__("pandas").read_parquet(out / "static_k" / "sites.parquet")
    row = sites[(sites["site"] == "mid") & (sites["n_samples"] > 0)].iloc[0]
    # compute = epochs x n x data_scale / (reference rate x capacity): base's 100 samples/s per rtx4090 node
    assert row["compute_s"] == pytest.approx(row["n_samples"] * 10 / (100.0 * row["capacity"]))
    c = json.loads((out / "centralized" / "summary.json").read_text())
    assert c["mean_comm_s"] == 0 and c["compute_over_comm"] is None
    assert not math.isnan(c["mean_compute_s"])


def test_calibrate_compute_writes_and_merges_an_entry_and_refuses_bad_input(tmp_path, capsys):
    out = tmp_path / "prof.json"
    write(tmp_path, PROFILE, "prof.json")
    assert main(["calibrate", "compute", "--device", "cpu", "--seconds", "0.2", "--no-update-sized",
                 "--entry", "here", "--out", str(out)]) == 0
    prof = load_profile(out)
    assert set(prof.entries) == {"base", "fast", "paper", "here"}  # merged: the others kept
    e = prof.entries["here"]
    assert e.basis == "measured" and e.study_samples_per_s > 0 and e.gb_samples_per_s is None
    assert e.measured.device == "cpu" and "thread" in e.measured.timing and "--entry here" in e.measured.command
    capsys.readouterr()
    bad = write(tmp_path, "{nope", "bad.json")
    assert main(["calibrate", "compute", "--device", "cpu", "--out", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "bad.json" in err and "{nope" not in err
    assert bad.read_text() == "{nope"  # never overwritten
    assert main(["calibrate", "compute", "--seconds", "0", "--out", str(tmp_path / "x.json")]) == 2
    assert "--seconds" in capsys.readouterr().err
