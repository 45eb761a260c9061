"""Training side of node agents: real learning, bit-identical resume (in process and in a fresh
process), complete and verified checkpoints, typed errors for bad files, sizes and speed."""

from __future__ import annotations

import hashlib
import io
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="testbed.nodes trains real PyTorch jobs: pip install torch==2.13.0")
pytest.importorskip("sklearn", reason="the digits workloads use scikit-learn's bundled data: pip install scikit-learn")

from testbed import errors  # noqa: E402
from testbed.nodes import checkpoint, datasets, workloads  # noqa: E402
from testbed.nodes.errors import CheckpointError  # noqa: E402
from testbed.nodes.job import Position, TrainingJob  # noqa: E402
from testbed.nodes.state_digest import state_sha256  # noqa: E402
from testbed.nodes.throughput import checkpoint_size_bytes, measure_steps_per_s, measure_throughput  # noqa: E402

WORKLOADS = ["mlp-digits", "cnn-digits", "char-transformer"]
ROOT = Path(__file__).resolve().parents[3]
N_STEPS, K_STEPS = 30, 13  # 30 steps cross an epoch boundary of the digits workloads (22 batches per epoch)


def _hex(losses: list[float]) -> list[str]:
    return [x.hex() for x in losses]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "error", "-m", "testbed.nodes", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _assert_same_job(a: TrainingJob, b: TrainingJob) -> None:
    assert _hex(a.loss_history) == _hex(b.loss_history)
    assert a.steps_done == b.steps_done and a.position == b.position
    for (na, pa), (nb, pb) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
        assert na == nb and torch.equal(pa, pb), na
    sa, sb = a.optimizer.state_dict(), b.optimizer.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i in sa["state"]:
        for key, va in sa["state"][i].items():
            assert torch.equal(va, sb["state"][i][key]) if torch.is_tensor(va) else va == sb["state"][i][key]
    assert a.scheduler.state_dict() == b.scheduler.state_dict()
    assert state_sha256(a.rng.to_plain()) == state_sha256(b.rng.to_plain())
    assert a.params_sha256() == b.params_sha256()


@pytest.fixture(scope="module")
def straight() -> dict[str, TrainingJob]:
    """Each workload trained N_STEPS steps in one go (the reference trajectories)."""
    jobs = {}
    for name in WORKLOADS:
        job = TrainingJob.create(name, seed=7, device="cpu")
        job.run(N_STEPS)
        jobs[name] = job
    return jobs


def test_families_map_to_stand_ins():
    assert workloads.for_family("resnet50").name == "cnn-digits"
    for fam in ("bert-large", "gpt2-medium", "llama-7b", "llama-13b", "LLaMA-70B"):
        assert workloads.for_family(fam).name == "char-transformer", fam
    for fam in ("custom", "something-new"):
        assert workloads.for_family(fam).name == workloads.DEFAULT_WORKLOAD == "mlp-digits"
    for name in WORKLOADS:
        assert workloads.for_family(name).name == name
    assert sorted(workloads.names()) == sorted(WORKLOADS)
    with pytest.raises(KeyError, match="known: char-transformer"):
        workloads.get("resnet50")


@pytest.mark.parametrize("name, steps, min_acc", [("mlp-digits", 300, 0.9), ("cnn-digits", 300, 0.85),
                                                  ("char-transformer", 150, 0.2)])
def test_training_really_learns(name, steps, min_acc):
    job = TrainingJob.create(name, seed=1, device="cpu")
    before = job.evaluate()
    losses = job.run(steps)
    after = job.evaluate()
    first, last = np.mean(losses[:20]), np.mean(losses[-20:])
    assert last < 0.75 * first, (first, last)
    assert after.test_loss < before.test_loss - 0.5
    chance = 1.0 / job.data.n_classes
    assert before.accuracy < 0.3 and after.accuracy > max(min_acc, 3 * chance), (before, after)
    assert job.steps_done == steps == len(job.loss_history)
    assert job.position == Position(steps // job.batches_per_epoch, steps % job.batches_per_epoch * job.batch_size)


def test_bundled_data():
    from sklearn.datasets import load_digits

    table, bunch = datasets.digits_array(), load_digits()
    assert np.array_equal(table[:, :-1], bunch.data) and np.array_equal(table[:, -1], bunch.target)
    d = datasets.digits()
    assert (d.n_train, len(d.y_test), d.n_classes) == (1438, 359, 10) and 0 <= d.x_train.min() <= d.x_train.max() <= 1
    t = datasets.text()
    assert datasets.corpus_text().startswith("The Zen of Python, by Tim Peters")
    assert t.n_classes == 96 and t.n_train > 5000 and len(t.y_test) > 1000
    assert torch.equal(t.x_train[:, 1:], t.y_train[:, :-1])  # the target is the next character
    assert datasets.text().fingerprint == t.fingerprint != d.fingerprint


def test_first_loss_is_near_log_classes(straight):
    for job in straight.values():  # freshly initialised models predict roughly uniformly
        assert abs(job.loss_history[0] - math.log(job.data.n_classes)) < 0.5


@pytest.mark.parametrize("name", WORKLOADS)
def test_resume_in_process_is_bit_identical(name, straight, tmp_path):
    ref = straight[name]
    first = TrainingJob.create(name, seed=7, device="cpu")
    first.run(K_STEPS)
    first.evaluate()  # evaluation uses no randomness and must not perturb training
    info = checkpoint.save(first, tmp_path / "k.pt")
    # Disturb everything process-global the job could depend on, and train an unrelated job.
    torch.manual_seed(12345), random.seed(5), np.random.seed(6)
    TrainingJob.create("mlp-digits", seed=99, device="cpu").run(3)
    resumed = checkpoint.load(tmp_path / "k.pt", device="cpu", expect_sha256=info.sha256)
    assert resumed.steps_done == K_STEPS and _hex(resumed.loss_history) == _hex(ref.loss_history[:K_STEPS])
    resumed.run(N_STEPS - K_STEPS)
    _assert_same_job(ref, resumed)
    a, b = checkpoint.save(ref, tmp_path / "a.pt"), checkpoint.save(resumed, tmp_path / "b.pt")
    assert a.sha256 == b.sha256 and a.size_bytes == b.size_bytes  # the files are byte-identical too


@pytest.mark.parametrize("name", WORKLOADS)
def test_resume_in_fresh_process_is_bit_identical(name, straight, tmp_path):
    ref = straight[name]
    job = TrainingJob.create(name, seed=7, device="cpu")
    job.run(K_STEPS)
    checkpoint.save(job, tmp_path / "k.pt")
    out = _cli("run", "--resume", str(tmp_path / "k.pt"), "--steps", str(N_STEPS - K_STEPS), "--device", "cpu",
               "--save", str(tmp_path / "n.pt"), "--losses-out", str(tmp_path / "losses.json"))
    assert out.returncode == 0, out.stderr
    got = json.loads((tmp_path / "losses.json").read_text())
    assert got["losses_hex"] == _hex(ref.loss_history) and got["steps_done"] == N_STEPS
    assert got["params_sha256"] == ref.params_sha256()
    assert got["checkpoint"]["sha256"] == checkpoint.save(ref, tmp_path / "ref.pt").sha256
    _assert_same_job(ref, checkpoint.load(tmp_path / "n.pt", device="cpu"))


def test_cli_straight_vs_saved_and_resumed_processes(tmp_path):
    common = ["--family", "resnet50", "--seed", "3", "--device", "cpu"]
    a = _cli("run", *common, "--steps", "25", "--losses-out", str(tmp_path / "a.json"), "--eval")
    b = _cli("run", *common, "--steps", "9", "--save", str(tmp_path / "k.pt"))
    c = _cli("run", "--resume", str(tmp_path / "k.pt"), "--seed", "3", "--steps", "16",
             "--losses-out", str(tmp_path / "c.json"))
    for proc in (a, b, c):
        assert proc.returncode == 0, proc.stderr
    la, lc = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "c.json"))
    assert la["losses_hex"] == lc["losses_hex"] and len(la["losses"]) == 25
    assert la["params_sha256"] == lc["params_sha256"] and la["workload"] == lc["workload"] == "cnn-digits"
    assert la["family"] == lc["family"] == "resnet50" and 0 <= la["eval"]["accuracy"] <= 1
    info = json.loads(b.stdout)["checkpoint"]
    assert info["size_bytes"] == (tmp_path / "k.pt").stat().st_size and info["step"] == 9


def test_cli_refuses_bad_arguments_and_files(tmp_path, capsys):
    from testbed.nodes.__main__ import main

    job = TrainingJob.create("mlp-digits", seed=3, device="cpu")
    checkpoint.save(job, tmp_path / "k.pt")
    assert main(["run", "--resume", str(tmp_path / "k.pt"), "--seed", "4", "--steps", "1"]) == 2
    assert "holds 3" in capsys.readouterr().err
    assert main(["run", "--steps", "1"]) == 2
    (tmp_path / "bad.pt").write_bytes((tmp_path / "k.pt").read_bytes()[:1000])
    assert main(["run", "--resume", str(tmp_path / "bad.pt"), "--steps", "1"]) == 1
    assert "bad.pt: not a readable checkpoint" in capsys.readouterr().err


def test_checkpoint_holds_all_state(tmp_path):
    job = TrainingJob.create("custom", seed=2, device="cpu")
    job.run(25)  # past one epoch (22 batches)
    info = checkpoint.save(job, tmp_path / "c.pt")
    doc = torch.load(tmp_path / "c.pt", weights_only=True)  # a plain dict: no arbitrary objects
    assert doc["format"] == checkpoint.FORMAT and doc["version"] == checkpoint.VERSION
    state = checkpoint.read_state(tmp_path / "c.pt")
    assert set(checkpoint.STATE_KEYS) <= set(state)
    assert (state["family"], state["workload"], state["seed"]) == ("custom", "mlp-digits", 2)
    assert state["steps_done"] == 25 == info.step and state["threads"] == 1 and state["device_type"] == "cpu"
    assert state["position"] == {"epoch": 1, "index": 3 * 64, "data_seed": job.data_seed}
    assert state["loss_history"].dtype == torch.float64 and state["loss_history"].tolist() == job.loss_history
    assert set(state["model"]) == set(job.model.state_dict())
    assert len(state["optimizer"]["state"]) == len(list(job.model.parameters()))
    assert state["scheduler"]["last_epoch"] == 25
    rng = state["rng"]
    assert rng["torch_cpu"].dtype == torch.uint8 and rng["torch_cuda"] is None
    assert rng["python"]["internal"].shape == (625,) and rng["numpy"]["key"].shape == (624,)
    assert state["data_fingerprint"] == job.data.fingerprint


def test_checkpoint_info_is_true_and_write_is_atomic(tmp_path):
    job = TrainingJob.create("mlp-digits", seed=0, device="cpu")
    job.run(3)
    path = tmp_path / "c.pt"
    path.write_bytes(b"old")
    info = checkpoint.save(job, path)
    data = path.read_bytes()
    assert info.size_bytes == len(data) and info.sha256 == hashlib.sha256(data).hexdigest()
    assert info.step == 3 and info.t_save_s > 0 and info.workload == "mlp-digits"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]  # no temporary file left behind
    assert checkpoint.to_bytes(job) == data


def _valid_checkpoint(tmp_path: Path) -> tuple[Path, bytes, str]:
    job = TrainingJob.create("mlp-digits", seed=0, device="cpu")
    job.run(2)
    path = tmp_path / "good.pt"
    checkpoint.save(job, path)
    return path, path.read_bytes(), state_sha256(job.state_dict())


@pytest.mark.parametrize("cut", [0, 1, 100, 0.5, -22, -1])
def test_truncated_checkpoint_raises_naming_the_file(tmp_path, cut):
    _, data, _ = _valid_checkpoint(tmp_path)
    bad = tmp_path / "truncated.pt"
    bad.write_bytes(data[: int(len(data) * cut) if isinstance(cut, float) else (cut if cut >= 0 else len(data) + cut)])
    with pytest.raises(CheckpointError, match="truncated.pt") as err:
        checkpoint.load(bad, device="cpu")
    assert isinstance(err.value, errors.TestbedError) and err.value.path == str(bad)


def test_flipped_weight_byte_is_detected(tmp_path):
    job = TrainingJob.create("mlp-digits", seed=0, device="cpu")
    job.run(2)
    checkpoint.save(job, tmp_path / "c.pt")
    data = bytearray((tmp_path / "c.pt").read_bytes())
    weight = job.model.state_dict()["net.3.weight"].numpy().tobytes()
    at = data.find(weight[:64])
    assert at > 0
    data[at + 1000] ^= 0x10  # torch.load alone accepts this silently
    (tmp_path / "c.pt").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"c\.pt: content SHA-256 mismatch"):
        checkpoint.load(tmp_path / "c.pt", device="cpu")


def test_every_flipped_byte_is_detected_or_harmless(tmp_path):
    path, data, digest = _valid_checkpoint(tmp_path)
    bad, detected = tmp_path / "flipped.pt", 0
    offsets = [*range(0, 4096, 61), *range(4096, len(data), len(data) // 40), *range(len(data) - 600, len(data), 37)]
    for off in offsets:
        flipped = bytearray(data)
        flipped[off] ^= 0xFF
        bad.write_bytes(bytes(flipped))
        try:
            state = checkpoint.read_state(bad)
        except CheckpointError as e:
            assert "flipped.pt" in str(e)
            detected += 1
        else:  # e.g. zip padding or a timestamp: the state itself is intact
            assert state_sha256(state) == digest, off
    assert detected > 0.7 * len(offsets)
    with pytest.raises(CheckpointError, match="SHA-256 of the file"):  # the file hash catches every flip
        checkpoint.read_state(bad, expect_sha256=hashlib.sha256(data).hexdigest())


def test_other_bad_files_raise_naming_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="missing.pt: cannot read"):
        checkpoint.load(tmp_path / "missing.pt")
    (tmp_path / "garbage.pt").write_bytes(bytes(range(256)) * 10)
    with pytest.raises(CheckpointError, match="garbage.pt: not a readable checkpoint"):
        checkpoint.load(tmp_path / "garbage.pt")
    torch.save({"weights": torch.ones(3)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="other.pt: not a testbed.nodes.checkpoint file"):
        checkpoint.load(tmp_path / "other.pt")
    path, _, _ = _valid_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="good.pt: SHA-256 of the file"):
        checkpoint.load(path, expect_sha256="0" * 64)


def _rewrite(path: Path, edit) -> None:
    doc = torch.load(path, weights_only=True)
    edit(doc["state"])
    doc["content_sha256"] = state_sha256(doc["state"])
    buf = io.BytesIO()
    torch.save(doc, buf)
    path.write_bytes(buf.getvalue())


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.pop("rng"), "state lacks rng"),
    (lambda s: s["position"].pop("data_seed"), "state.position lacks data_seed"),
    (lambda s: s.update(data_fingerprint="0" * 64), "data_fingerprint"),
    (lambda s: s.update(workload="nope"), "unknown workload 'nope'"),
    (lambda s: s["position"].update(index=5), "not a batch boundary"),
    (lambda s: s.update(steps_done=99), "does not match steps_done=99"),
])
def test_inconsistent_checkpoint_raises(tmp_path, edit, message):
    path, _, _ = _valid_checkpoint(tmp_path)
    _rewrite(path, edit)
    with pytest.raises(CheckpointError, match=f"good.pt: .*{message}"):
        checkpoint.load(path, device="cpu")


def test_steps_leave_process_rng_alone():
    job = TrainingJob.create("char-transformer", seed=0, device="cpu")
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    before = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    job.run(2)
    assert torch.equal(before[0], torch.get_rng_state()) and before[1] == random.getstate()
    assert np.array_equal(before[2], np.random.get_state()[1])


def test_jobs_in_threads_stay_bit_exact(straight):
    import threading

    jobs = [TrainingJob.create(name, seed=7, device="cpu") for name in ("mlp-digits", "cnn-digits")]
    threads = [threading.Thread(target=job.run, args=(N_STEPS,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for job in jobs:
        _assert_same_job(straight[job.workload.name], job)


@pytest.mark.parametrize("name", WORKLOADS)
def test_sizes_and_throughput(name):
    n_params = TrainingJob.create(name, seed=0, device="cpu").n_params
    size = checkpoint_size_bytes(name)
    slots = 2 if name == "cnn-digits" else 3  # SGD momentum: weights + 1 buffer; Adam(W): weights + 2
    assert slots * 4 * n_params < size < slots * 4 * n_params + 64_000
    t = measure_throughput(name, 0.3, device="cpu")
    assert t.steps >= 1 and t.seconds >= 0.3 and t.steps_per_s > 5 and t.threads == 1
    assert t.samples_per_s == pytest.approx(t.steps_per_s * t.batch_size)
    assert measure_steps_per_s(name, 0.1, device="cpu") > 0
