"""The stand-in models' size option: a real, trained model of the size asked for, whose checkpoint
round-trips bit for bit (a small size here, on CPU; 1-10 GB is the same code on a GPU host)."""

from __future__ import annotations

import pytest
import yaml

torch = pytest.importorskip("torch")

from testbed.nodes import checkpoint  # noqa: E402
from testbed.nodes.job import TrainingJob  # noqa: E402
from testbed.nodes.models import n_params, widen, width_for_bytes  # noqa: E402


@pytest.mark.parametrize("family", ["mlp-digits", "cnn-digits", "char-transformer"])
def test_a_job_grows_to_the_size_asked_and_still_learns(family):
    small = TrainingJob.create(family, seed=3)
    big = TrainingJob.create(family, seed=3, model_mb=1.0)
    assert 4 * big.n_params == pytest.approx(1e6, rel=0.01)
    # the added block starts as the identity: the first loss is the small model's
    assert big.step() == pytest.approx(small.step(), rel=1e-5)
    losses = big.run(20)
    added = big.model.down.weight
    assert torch.isfinite(added).all() and added.abs().sum() > 0  # trained, not padding
    assert losses[-1] < losses[0]


def test_checkpoint_of_a_grown_model_is_its_size_and_resumes_exactly(tmp_path):
    job = TrainingJob.create("mlp-digits", seed=1, model_mb=8.0)
    job.run(3)
    info = checkpoint.save(job, tmp_path / "c.pt")
    assert info.size_bytes > 3 * 8e6 * 0.95  # parameters + Adam's two moments
    back = checkpoint.load(tmp_path / "c.pt")
    assert back.model_mb == 8.0 and back.params_sha256() == job.params_sha256()
    assert back.step() == job.step()
    plain = TrainingJob.create("mlp-digits", seed=1)
    with pytest.raises(ValueError, match="model_mb"):
        plain.load_state_dict(job.state_dict())


def test_sizes_below_the_stand_in_are_refused():
    base = torch.nn.Linear(10, 10)
    with pytest.raises(ValueError, match="not larger"):
        widen(base, 10, 100.0)
    assert width_for_bytes(n_params(base), 10, 4e6) == (1e6 - 110 - 10) // 21


def test_the_agent_starts_a_job_of_the_size_asked(tmp_path):
    from testbed.agent.agent import Agent
    from testbed.agent.protocol import RequestRefused, StartJob

    agent = Agent("a", tmp_path, "t" * 32)
    try:
        agent.start_job(StartJob(job_id="j1", family="mlp-digits", seed=1, steps_per_s=5.0, model_mb=1.0))
        assert 4 * agent.jobs["j1"].job.n_params == pytest.approx(1e6, rel=0.01)
        with pytest.raises(RequestRefused, match="args.model_mb"):
            agent.start_job(StartJob(job_id="j2", family="mlp-digits", seed=1, model_mb=0.01))
    finally:
        agent.shutdown()


def test_the_scenario_option_is_checked(tmp_path):
    from testbed.errors import SpecError
    from testbed.spec import load_scenario
    from tests.conftest import small_scenario_dict

    d = small_scenario_dict()
    d["emulation"] = {"nodes": "agents", "model_mb": 300}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(d))
    assert load_scenario(f).scenario.emulation.model_mb == 300
    d["emulation"]["model_mb"] = 0
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(SpecError, match="emulation.model_mb"):
        load_scenario(f)
