"""A plain PyTorch training loop, wrapped in the testbed's workload contract (docs/workloads.md).

Nothing here imports testbed: the contract is four environment variables and SIGTERM.

    TESTBED_CKPT_PATH      write the checkpoint here when told to stop (tmp file + os.replace)
    TESTBED_RESUME_FROM    if set: load this checkpoint first (model, optimizer, RNG, data order, step)
    TESTBED_PROGRESS_PATH  append {"step": N, "loss": x} per step (a final line adds "digest")
    TESTBED_MAX_STEPS      stop (exit 0) after this many steps in total
    SIGTERM                finish the current step, write the checkpoint, exit 0

Run it alone: ``TESTBED_CKPT_PATH=/tmp/c TESTBED_PROGRESS_PATH=/tmp/p TESTBED_MAX_STEPS=50 python train_loop.py``.
A migrated run ends with the same ``digest`` as an uninterrupted one: everything the next step
depends on (weights, optimizer moments, the dropout RNG, the shuffling generator, the position in
the epoch) is in the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time

import torch
from torch import nn

STOP = False


def _on_sigterm(signum, frame):  # checkpoint at the next step boundary
    global STOP
    STOP = True


def make_data(seed: int, n: int = 512, d: int = 20, classes: int = 4):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, classes, generator=g)
    return x, (x @ w).argmax(dim=1)


def digest(model: nn.Module, opt: torch.optim.Optimizer) -> str:
    h = hashlib.sha256()
    for t in list(model.state_dict().values()) + [v for s in opt.state_dict()["state"].values() for v in s.values()
                                                  if isinstance(v, torch.Tensor)]:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    ckpt_path = os.environ["TESTBED_CKPT_PATH"]
    progress = open(os.environ["TESTBED_PROGRESS_PATH"], "a", encoding="utf-8")
    max_steps = int(os.environ.get("TESTBED_MAX_STEPS") or 0) or None
    pace = float(os.environ.get("TESTBED_STEPS_PER_S") or 0) or None
    seed = int(os.environ.get("TESTBED_SEED", "0"))
    batch = 32

    resume = os.environ.get("TESTBED_RESUME_FROM")
    ck = torch.load(resume, weights_only=False) if resume else None
    if ck is not None:
        seed = ck["seed"]  # the data set is derived from it
    torch.manual_seed(seed)
    x, y = make_data(seed)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    shuffle = torch.Generator().manual_seed(seed + 1)
    step, order, pos = 0, torch.randperm(len(x), generator=shuffle), 0

    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        torch.set_rng_state(ck["torch_rng"])
        shuffle.set_state(ck["shuffle_rng"])
        step, order, pos = ck["step"], ck["order"], ck["pos"]

    def report(**extra):
        progress.write(json.dumps({"step": step, **extra}) + "\n")
        progress.flush()

    report(event="resumed" if resume else "started")
    while not STOP and (max_steps is None or step < max_steps):
        t0 = time.monotonic()
        if pos + batch > len(x):  # a new epoch: a new order from the shuffling generator
            order, pos = torch.randperm(len(x), generator=shuffle), 0
        idx = order[pos:pos + batch]
        pos += batch
        model.train()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        report(loss=round(loss.item(), 6))
        if pace:
            time.sleep(max(0.0, 1.0 / pace - (time.monotonic() - t0)))

    if STOP:  # SIGTERM: the checkpoint, atomically
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                    "shuffle_rng": shuffle.get_state(), "step": step, "order": order, "pos": pos, "seed": seed}, tmp)
        os.replace(tmp, ckpt_path)
        report(event="checkpoint")
    else:  # done: the state's digest, for comparing a migrated run with an uninterrupted one
        report(event="done", digest=digest(model, opt))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
