"""The example's training program, run by the image's own python3 (/usr/bin/python3) with the
image's own library (image_lib), under the testbed's workload contract (docs/workloads.md):

    TESTBED_CKPT_PATH      write the checkpoint here on SIGTERM (tmp file + os.replace)
    TESTBED_RESUME_FROM    if set: load this checkpoint first (weights, RNG, step)
    TESTBED_PROGRESS_PATH  append {"step": N, "loss": x} per step (a final line adds "digest")
    TESTBED_MAX_STEPS      stop (exit 0) after this many steps in total
    SIGTERM                finish the current step, write the checkpoint, exit 0

Each start also reports where it runs (the image's /opt/example/motd, the interpreter, the
host name = the site) in its first progress line, and appends the same to the file named by
$EXAMPLE_REPORT if that is set.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import socket
import sys
import time

import image_lib  # only in the image

STOP = False


def _on_sigterm(signum, frame):
    global STOP
    STOP = True


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    ckpt_path = os.environ["TESTBED_CKPT_PATH"]
    progress = open(os.environ["TESTBED_PROGRESS_PATH"], "a", encoding="utf-8")
    max_steps = int(os.environ.get("TESTBED_MAX_STEPS") or 0) or None
    pace = float(os.environ.get("TESTBED_STEPS_PER_S") or 0) or None
    seed = int(os.environ.get("TESTBED_SEED", "0"))
    resume = os.environ.get("TESTBED_RESUME_FROM")

    xs, ys = image_lib.make_data(seed)
    rng = random.Random(seed + 1)
    w, step = [0.0] * image_lib.N_FEATURES, 0
    if resume:
        with open(resume, encoding="utf-8") as f:
            ck = json.load(f)
        w, step = ck["w"], ck["step"]
        rng.setstate((ck["rng"][0], tuple(ck["rng"][1]), ck["rng"][2]))

    with open("/opt/example/motd", encoding="utf-8") as f:
        where = {"motd": f.read().strip(), "lib": image_lib.NAME, "python": sys.executable,
                 "host": socket.gethostname(), "resumed": bool(resume), "step": step}
    if os.environ.get("EXAMPLE_REPORT"):
        with open(os.environ["EXAMPLE_REPORT"], "a", encoding="utf-8") as f:
            f.write(json.dumps(where) + "\n")

    def report(**extra):
        progress.write(json.dumps({"step": step, **extra}) + "\n")
        progress.flush()

    report(event="resumed" if resume else "started", where=where)
    while not STOP and (max_steps is None or step < max_steps):
        t0 = time.monotonic()
        idx = [rng.randrange(len(xs)) for _ in range(16)]
        loss = image_lib.sgd_step(w, [xs[i] for i in idx], [ys[i] for i in idx], lr=0.05)
        step += 1
        report(loss=round(loss, 6))
        if pace:
            time.sleep(max(0.0, 1.0 / pace - (time.monotonic() - t0)))

    if STOP:
        tmp = ckpt_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"w": w, "step": step, "rng": rng.getstate()}, f)
        os.replace(tmp, ckpt_path)
        report(event="checkpoint")
    else:
        report(event="done", digest=hashlib.sha256(json.dumps(w).encode()).hexdigest())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
