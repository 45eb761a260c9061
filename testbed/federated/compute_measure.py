"""``testbed calibrate compute``: time this machine's training speed and make a compute-profile entry.

On CPU the measurement is :mod:`testbed.federated.throughput`'s (CPU time of one thread, so a busy
shared machine does not slow it): the study's model through FedAvg's own local training, and the
1 GB-update-sized stand-in MLP (fastest step). On CUDA the same two models train on the GPU with
the data already on it, timed in wall time between ``torch.cuda.synchronize()`` calls after an
untimed warm-up (the GPU is the device being described; wall time is what it takes). The entry
says which (``measured.timing``), with the command, date, machine, device and torch version.
"""

from __future__ import annotations

import datetime as dt
import platform
import time

from testbed.spec.compute_profile import MODELS  # noqa: F401  (the two models an entry can hold)

GB = 1.0  # the stand-in's update size: entries hold the rate of a 1 GB model (gb_samples_per_s)
CPU_ENTRY = "cpu-1thread"


def _machine() -> dict:
    import os

    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"hostname": platform.node(), "platform": platform.platform(), "cpus": os.cpu_count() or 0,
            "cpu": cpu or platform.processor()}


def _entry_name(name: str) -> str:
    import re

    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip().lower()).strip("-.")
    return (slug or "gpu")[:64]


def _study_model_desc(fl, data) -> str:
    t = fl.training
    return (f"{t.model} (hidden {t.hidden}), batch {t.batch_size}, {fl.data.dataset} "
            f"({data.n_train} training samples of shape {tuple(data.x_train.shape[1:])})")


def measure_entry(fl, *, device: str, seconds: float, entry: str | None, update_sized: bool,
                  command: str) -> tuple[str, dict]:
    """(entry name, entry as a dict) of a measurement of ``fl``'s training on ``device``."""
    import torch

    from testbed.federated.data import load_dataset

    data = load_dataset(fl.data.dataset)
    use_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        from testbed.errors import SpecError

        raise SpecError([("--device", "torch sees no CUDA device here")])
    rec: dict = {"basis": "measured", "model": _study_model_desc(fl, data)}
    if use_cuda:
        dev = torch.device("cuda" if device == "auto" else device)
        name = torch.cuda.get_device_name(dev)
        rec["study_samples_per_s"] = _cuda_study(fl, data, dev, seconds)
        if update_sized:
            rec["gb_samples_per_s"] = _cuda_update_sized(fl, data, dev, seconds)
        timing = ("wall time on the GPU between torch.cuda.synchronize() calls, data on the device, after a warm-up; "
                  "the 1 GB stand-in: its fastest step")
        desc, default_name = f"{name}, one GPU", _entry_name(name)
    else:
        from testbed.federated import throughput

        rec["study_samples_per_s"] = throughput.measure_samples_per_s(data, fl.training, seed=0, seconds=seconds)
        if update_sized:
            rec["gb_samples_per_s"] = throughput.measure_update_sized_samples_per_s(
                GB, data, fl.training, seed=0, seconds=seconds).samples_per_s
        name = "cpu"
        timing = ("CPU time of one thread (time.thread_time, torch limited to 1 thread), after a warm-up; "
                  "the 1 GB stand-in: its fastest step")
        desc, default_name = "one CPU thread of this machine", CPU_ENTRY
    rec["description"] = desc
    rec["measured"] = {"command": command, "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "device": name, "timing": timing, "machine": _machine(), "torch": torch.__version__}
    return entry or default_name, rec


def _cuda_study(fl, data, dev, seconds: float) -> float:
    """Samples/s of the study's model trained on ``dev`` (whole epochs of mini-batch SGD)."""
    import torch

    from testbed.federated import fedavg

    t = fl.training
    torch.manual_seed(0)
    model = fedavg.make_model(t.model, hidden=t.hidden, n_classes=data.n_classes, seed=0).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=t.lr, momentum=t.momentum)
    x, y = data.x_train.to(dev), data.y_train.to(dev)
    n, b = data.n_train, t.batch_size

    def epoch() -> None:
        perm = torch.randperm(n, device=dev)
        for i in range(0, n, b):
            idx = perm[i:i + b]
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()

    epoch()
    torch.cuda.synchronize(dev)
    samples, t0 = 0, time.perf_counter()
    while True:
        epoch()
        torch.cuda.synchronize(dev)
        samples += n
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return samples / elapsed


def _cuda_update_sized(fl, data, dev, seconds: float) -> float:
    """Samples/s of the 1 GB-update-sized MLP on ``dev``: its fastest step of the scenario's batch size."""
    import torch

    from testbed.federated.throughput import MIN_STEPS, update_sized_model

    model = update_sized_model(GB, data.x_train.shape[1], data.n_classes, seed=0).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=fl.training.lr, momentum=fl.training.momentum)
    b = min(fl.training.batch_size, data.n_train)
    x = data.x_train[:b].reshape(b, -1).float().to(dev)
    y = data.y_train[:b].to(dev)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    torch.cuda.synchronize(dev)
    durations: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(durations) < MIN_STEPS:
        s = time.perf_counter()
        step()
        torch.cuda.synchronize(dev)
        durations.append(time.perf_counter() - s)
    return b / min(durations)
