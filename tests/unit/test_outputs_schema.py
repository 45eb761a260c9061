"""Every output file matches docs/outputs.md: the quick start (migration study), a tiny federated
(PowerTrip) scenario and a one-cell sweep are run, and each file's columns or keys, their dtypes and the
units their names carry are checked against the document's tables. A new column that the document does
not list fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import testbed
from testbed.analysis.federated_summary import MEASURED_EXCHANGE_METRICS, energy_summary
from testbed.analysis.summary import BATTERY_COLUMNS, SIGNAL_COLUMNS, grid_signal_metrics
from testbed.studies import FederatedStudy, MigrationStudy
from tests.conftest import ROOT
from tests.unit import outputs_schema as schema

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
CHECKED = (".parquet", ".csv", ".json")
LONG_VALUES = {"value", "mean", "std", "ci95"}  # long tables: the unit is in another column (unit, score, metric)


@pytest.fixture(scope="module")
def doc():
    return schema.load()


@pytest.fixture(scope="module")
def migration_run(tmp_path_factory):
    return testbed.run(QUICKSTART, substrate="sim", out=tmp_path_factory.mktemp("mig") / "qs", progress=False,
                       plots=False).path


@pytest.fixture(scope="module")
def federated_run(tmp_path_factory):
    from tests.unit.federated_support import tiny

    d = tiny()
    d["policies"] = [{"name": "random", "k": 2}, {"name": "static_k", "k": [1, 2]},
                     {"name": "powertrip", "k_init": 1, "window": 1}]
    path = tmp_path_factory.mktemp("fl") / "fl.yaml"
    path.write_text(json.dumps(d), encoding="utf-8")
    return testbed.run(path, substrate="sim", out=path.parent / "out", progress=False, plots=False).path


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    (d / "s.yaml").write_text(f"scenario: {QUICKSTART}\nseeds: [1]\ngrid:\n  duration_h: [24]\n"
                              "metrics: [grid_kwh, mean_jct_s, migrations]\n", encoding="utf-8")
    testbed.sweep(d / "s.yaml", d / "out", parallel=1)
    return d / "out"


def _files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file() and p.suffix in CHECKED)


def _check_run(run: Path, study: str, files) -> list[str]:
    labels = {p.name for p in run.iterdir() if p.is_dir()}
    out = []
    for path in _files(run):
        rel = path.relative_to(run).as_posix()
        if rel == "trial.json":  # a sweep trial's own record: checked with the sweep
            continue
        out += schema.problems(path, schema.pattern_of(rel, labels), study, files)
    return out


def test_the_document_parses_and_every_name_carries_its_unit(doc):
    units, files = doc
    assert units and len(files) >= 15
    wrong = []
    for section, fields in files.items():
        for f in fields.values():
            said = schema.unit_of(f.name, units)
            if f.unit.startswith("("):  # the unit is in another column or name (long tables, placeholders)
                if f.name not in LONG_VALUES and not f.name.startswith("<"):
                    wrong.append(f"{section}: {f.name}: only {sorted(LONG_VALUES)} or a <placeholder> may take "
                                 "its unit from another column")
            elif (said or schema.NO_UNIT) != f.unit:
                wrong.append(f"{section}: {f.name}: documented in {f.unit!r}, its name says {said or 'no unit'}")
            if not f.description or f.description.upper().startswith("TODO"):
                wrong.append(f"{section}: {f.name}: no description")
    assert not wrong, "\n".join(wrong)


def test_every_file_of_a_migration_run_matches_the_document(doc, migration_run):
    _, files = doc
    assert not _check_run(migration_run, "migration", files), "\n".join(_check_run(migration_run, "migration", files))
    names = {p.name for p in _files(migration_run)}
    assert {"candidates.parquet", "candidate_scores.parquet", "traces.parquet", "energy_by_site.csv"} <= names


def test_every_file_of_a_federated_run_matches_the_document(doc, federated_run):
    _, files = doc
    problems = _check_run(federated_run, "federated", files)
    assert not problems, "\n".join(problems)
    assert (federated_run / "static_k" / "summary.json").is_file()  # the best-of entry is checked too


def test_an_undocumented_column_fails(doc, migration_run, tmp_path):
    _, files = doc
    jobs = pd.read_parquet(migration_run / "static" / "jobs.parquet").assign(jct_h=1.0)
    jobs.to_parquet(tmp_path / "jobs.parquet")
    assert schema.problems(tmp_path / "jobs.parquet", "<policy>/jobs.parquet", "migration", files) == [
        "<policy>/jobs.parquet: jct_h is not documented"]
    typed = pd.read_parquet(migration_run / "static" / "migrations.parquet")
    typed["actual_total_s"] = typed["actual_total_s"].astype(object)
    typed.to_parquet(tmp_path / "migrations.parquet")
    assert schema.problems(tmp_path / "migrations.parquet", "<policy>/migrations.parquet", "migration", files)


def test_the_tables_say_what_the_issue_asks(migration_run, federated_run):
    """policy in every per-policy table, a UTC time beside t_s, long traces, one status word for done,
    no all-null object column, every duration of a table in one unit."""
    for run in (migration_run, federated_run):
        for path in run.rglob("*.parquet"):
            df = pd.read_parquet(path)
            assert not [c for c in df.columns if df[c].dtype == object], path
            if path.parent != run:
                assert list(df.columns[:2]) == ["policy", "label"] and (df["label"] == path.parent.name).all(), path
            if "t_s" in df.columns:
                assert str(df["time"].dtype) == "datetime64[us, UTC]", path
        tr = pd.read_parquet(run / "traces.parquet")
        assert list(tr.columns) == ["t_s", "time", "site", "link", "quantity", "unit", "value"]
        assert (tr["site"].isna() != tr["link"].isna()).all()
    assert (pd.read_csv(migration_run / "static" / "energy_by_site.csv")["policy"] == "static").all()
    jobs = pd.read_parquet(migration_run / "feasibility_aware" / "jobs.parquet")
    migs = pd.read_parquet(migration_run / "feasibility_aware" / "migrations.parquet")
    assert "completed" in set(jobs["status"]) and "done" not in set(jobs["status"])
    assert set(migs["status"]) <= {"completed", "failed", "unfinished"}
    start = pd.Timestamp(testbed.load(QUICKSTART).start)
    ts = pd.read_parquet(migration_run / "static" / "timeseries.parquet")
    assert (ts["time"] - pd.to_timedelta(ts["t_s"], unit="s")).eq(start.tz_localize("UTC") if start.tzinfo is None
                                                                   else start.tz_convert("UTC")).all()
    for df in (jobs, migs):  # durations in seconds, never h or min beside them
        assert not [c for c in df.columns if c.endswith(("_h", "_min")) and not c.endswith("gpu_h")]


def test_every_file_of_a_sweep_matches_the_document(doc, sweep_run):
    units, files = doc
    manifest = json.loads((sweep_run / "sweep.json").read_text())
    metrics = ["grid_kwh", "mean_jct_s", "migrations"]
    documented = files["migration:<policy>/summary.json"]
    assert all(m in documented and (schema.unit_of(m, units) or schema.NO_UNIT) == documented[m].unit for m in metrics)
    placeholders = {**{p: "<parameter>" for p in manifest["param_columns"]}, **{m: "<metric>" for m in metrics}}
    problems = []
    for name in ("sweep.json", "trials.csv", "results.parquet", "table.csv"):
        problems += schema.problems(sweep_run / name, name, None, files, placeholders)
    problems += schema.problems(sweep_run / "results.csv", "results.parquet", None, files, placeholders)
    assert set(pd.read_csv(sweep_run / "table.csv")["metric"]) == set(metrics)
    for trial in sorted(sweep_run.glob("trials/*/seed-*")):
        problems += schema.problems(trial / "trial.json", "trials/<cell>/seed-<s>/trial.json", None, files)
        problems += _check_run(trial, "migration", files)
    assert not problems, "\n".join(problems)


# -- the numeric summary columns a study declares (what a sweep's metrics: may name) ----------------

STUDY_OF = {"migration": MigrationStudy, "federated": FederatedStudy}
NUMERIC = {"number", "integer"}


def _documented_numeric(fields: dict[str, schema.Field]) -> set[str]:
    """Keys typed number or integer (or null): what a sweep can average."""
    return {n for n, f in fields.items() if {t.strip() for t in f.dtype.split(" or ")} - {"null"} <= NUMERIC}


@pytest.mark.parametrize("study", sorted(STUDY_OF))
def test_a_studys_summary_metrics_are_its_documented_numeric_keys(doc, study):
    _, files = doc
    declared = STUDY_OF[study].summary_metrics()
    assert len(set(declared)) == len(declared)
    assert sorted(declared) == sorted(_documented_numeric(files[schema.key("<policy>/summary.json", study)]))


def _numeric_keys(run: Path) -> tuple[set[str], set[str]]:
    """(numeric keys of any of the run's summary.json, those in every one); null counts as numeric."""
    keys = [{k for k, v in json.loads(p.read_text()).items()
             if v is None or isinstance(v, (int, float)) and not isinstance(v, bool)}
            for p in sorted(run.glob("*/summary.json"))]
    assert keys, run
    return set().union(*keys), set.intersection(*keys)


def test_a_runs_numeric_summary_keys_are_its_studys_metrics(migration_run, federated_run):
    """Every numeric key a real run wrote is declared; every declared key a run without batteries,
    carbon / price traces or measured exchanges always has is written."""
    any_, every = _numeric_keys(migration_run)
    declared = set(MigrationStudy.summary_metrics())
    assert any_ <= declared and every == declared - set(SIGNAL_COLUMNS) - set(BATTERY_COLUMNS)
    any_, every = _numeric_keys(federated_run)
    declared = set(FederatedStudy.summary_metrics())
    assert any_ <= declared and "k" in any_
    assert every == declared - {"k", *MEASURED_EXCHANGE_METRICS, *SIGNAL_COLUMNS}


def test_signal_and_battery_columns_are_declared():
    ts = pd.DataFrame({"co2_kg": [1.0], "grid_cost": [2.0], "battery_soc_kwh": [3.0],
                       **{c: [1.0] for c in BATTERY_COLUMNS}})
    assert set(grid_signal_metrics(ts)) == set(SIGNAL_COLUMNS + BATTERY_COLUMNS) <= set(MigrationStudy.summary_metrics())
    sites = pd.DataFrame({"site": ["a"], "energy_kwh": [1.0], "renewable_kwh": [0.5], "grid_kwh": [0.5],
                          "co2_kg": [1.0], "grid_cost": [2.0]})
    numeric = {k for k, v in energy_summary(sites).items() if isinstance(v, float)}
    assert numeric == {"energy_kwh", "renewable_kwh", "grid_kwh", "co2_kg", "grid_cost"}
    assert numeric <= set(FederatedStudy.summary_metrics())


# A unit's dimension: one quantity may carry one unit of it in every output (a power in kW is not an
# energy in kWh; a duration is seconds everywhere, not hours in one table and seconds in another).
DIMENSIONS = {"s": "time", "min": "time", "h": "time", "W": "power", "kW": "power", "kWh": "energy",
              "GB": "data", "B": "data"}
# What a name may say before the quantity itself: a statistic or where the value comes from.
QUALIFIERS = re.compile(r"^(?:(?:mean|median|p95|p90|max|min|total|predicted|actual|outcome|true)_)+")


def test_one_name_and_unit_per_quantity_in_every_output(doc):
    """Every documented column and key (every output file is checked against the document above) is a
    Python identifier (``df.query`` and attribute access take it), and a quantity -- its name less the
    statistic or source in front and the unit at the end -- has one unit per dimension across all
    outputs: ``jct_s`` in the jobs and ``mean_jct_s`` in the summary, never ``mean_jct_h`` beside them."""
    units, files = doc
    ordered = sorted(units, key=len, reverse=True)
    seen: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for where, cols in files.items():
        for name in cols:
            if name.startswith("<"):
                continue  # a placeholder (one column per parameter, metric or summary key)
            assert name.isidentifier(), f"{where}: {name!r} is not an identifier"
            suffix = next((s for s in ordered if name.endswith(s)), None)
            if suffix is None or units[suffix] not in DIMENSIONS:
                continue
            quantity = QUALIFIERS.sub("", name[: -len(suffix)])
            seen.setdefault((quantity, DIMENSIONS[units[suffix]]), set()).add((units[suffix], f"{where}: {name}"))
    mixed = {k: sorted(v) for k, v in seen.items() if len({u for u, _ in v}) > 1}
    assert not mixed, mixed
    old = re.compile(r"^(?:pred_.*|model_(?:checkpoint|transfer|load|downtime|total)_s|model_goodput_gbps|n_migrations)$")
    assert not [n for cols in files.values() for n in cols if old.match(n)]  # predicted_*, outcome_*, migrations
