"""Two studies, one runner: each scenario picks its study; run_scenario owns the results directory,
the traces table, the scenario copy and the manifest for whatever study runs; the federated
exchange is an interface (modelled on sim, real transfers on netns)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace

import pandas as pd
import pytest

import testbed.studies as studies
from testbed.federated.netns_exchange import NetnsExchange
from testbed.federated.exchange import Exchange, ModelledExchange, make_exchange
from testbed.federated.roundtime import SiteTime
from testbed.inputs import build_inputs
from testbed.recorder.writer import PARTIAL_RE
from testbed.runner import run_scenario
from testbed.spec.load import LoadedScenario, load_scenario
from testbed.studies import FederatedStudy, MigrationStudy, PolicyRun, Study, study_for
from tests.conftest import ROOT
from tests.unit.federated_support import tiny_scenario

QUICK = ROOT / "scenarios" / "quickstart.yaml"


def _fl_loaded(**fl) -> LoadedScenario:
    return LoadedScenario(scenario=tiny_scenario(**fl), path=ROOT / "tiny.yaml", text="name: fl-tiny\n",
                          sha256="0" * 64, topology_path=None)


def test_each_scenario_picks_its_study():
    mig = study_for(load_scenario(QUICK), substrate="sim")
    fl = study_for(_fl_loaded(), substrate="netns")
    assert type(mig) is MigrationStudy and type(fl) is FederatedStudy
    assert isinstance(mig, Study) and isinstance(fl, Study) and fl.substrate == "netns"


def test_the_exchange_is_an_interface():
    assert issubclass(NetnsExchange, Exchange) and issubclass(ModelledExchange, Exchange)

    class Half(Exchange):  # no exchange(): not an exchange
        @property
        def describe(self) -> dict:
            return {}

    with pytest.raises(TypeError):
        Half()
    inputs = build_inputs(tiny_scenario(), None)
    assert type(make_exchange("sim", inputs, None)) is ModelledExchange
    # netns without emulated transfers: the exchange stays modelled (nothing live is made)
    no_transfers = build_inputs(tiny_scenario(emulated_transfers=False), None)
    assert type(make_exchange("netns", no_transfers, None)) is ModelledExchange
    with ModelledExchange() as ex:
        got = ex.exchange(1, 0.0, {"near": SiteTime("near", 10, 1.0, 5.0, 2.0, 3.0)}, {}, 100)
    assert got == {"near": (2.0, 3.0)} and ex.describe["substrate"] == "sim" and not ex.measured


class ProbeStudy(Study):
    """A throwaway study: two runs, one file each; fails in run ``fail`` when asked."""

    name = "probe"
    fail: str | None = None
    made: list["ProbeStudy"] = []

    @classmethod
    def applies(cls, scenario) -> bool:
        return scenario.name == "study-probe"

    def validate(self) -> None:
        pass

    def live(self, inputs) -> bool:
        return False

    def start(self, inputs, run_id, stack: contextlib.ExitStack) -> list[PolicyRun]:
        self.inputs, self.closed = inputs, False
        ProbeStudy.made.append(self)
        stack.callback(setattr, self, "closed", True)
        return [PolicyRun("a", None), PolicyRun("b", None)]

    def run(self, run: PolicyRun):
        if run.label == self.fail:
            raise RuntimeError(f"probe run {run.label} failed")
        return len(run.label)

    def summarize(self, run, record, wall_s, folder) -> dict:
        (folder / "record.txt").write_text(str(record))
        return {"label": run.label, "record": record}

    def compare(self, summaries, out):
        return {"labels": list(summaries)}, "# probe\n"

    def traces(self):
        site = next(iter(self.inputs.renewable_kw))
        return [(f"probe_kw:{site}", self.inputs.renewable_kw[site])]

    def describe(self) -> dict:
        return {"substrate": "sim", "study": self.name}


@pytest.fixture()
def probe(monkeypatch):
    loaded = load_scenario(QUICK)
    loaded = replace(loaded, scenario=loaded.scenario.model_copy(update={"name": "study-probe"}))
    monkeypatch.setattr(studies, "STUDIES", (ProbeStudy, *studies.STUDIES))
    monkeypatch.setattr(ProbeStudy, "fail", None)
    monkeypatch.setattr(ProbeStudy, "made", [])
    return loaded


def test_the_runner_writes_what_every_study_shares(probe, tmp_path):
    out = run_scenario(probe, out_dir=tmp_path / "res", progress=False, argv=["probe"])
    assert (out / "a" / "record.txt").read_text() == "1" and (out / "b" / "record.txt").read_text() == "1"
    assert json.loads((out / "comparison.json").read_text()) == {"labels": ["a", "b"]}
    assert (out / "comparison.md").read_text() == "# probe\n"
    assert (out / "scenario.yaml").read_text() == probe.text
    m = json.loads((out / "manifest.json").read_text())
    assert m["substrate"] == {"substrate": "sim", "study": "probe"} and set(m["wall_time_s"]) == {"a", "b"}
    tr = pd.read_parquet(out / "traces.parquet")
    assert len(tr) and set(zip(tr["quantity"], tr["unit"], tr["site"])) == {("probe", "kW", probe.scenario.sites[0].name)}
    assert tr["link"].isna().all() and str(tr["time"].dtype) == "datetime64[us, UTC]"


def test_a_failed_study_leaves_no_results_and_closes_what_it_opened(probe, tmp_path, monkeypatch):
    monkeypatch.setattr(ProbeStudy, "fail", "b")
    with pytest.raises(RuntimeError, match="probe run b failed"):
        run_scenario(probe, out_dir=tmp_path / "res", progress=False)
    assert len(ProbeStudy.made) == 1 and ProbeStudy.made[0].closed
    assert not (tmp_path / "res").exists() and not [p for p in tmp_path.iterdir() if PARTIAL_RE.match(p.name)]
