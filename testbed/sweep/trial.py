"""One sweep trial: one cell's scenario at one seed, run by the same code path as ``testbed run``.

``run_trial`` runs in a worker (a local process or a Ray task) and never raises for a failed
run: it returns a result dict that the driver records. With ``pack=True`` (Ray) the run directory
is built in a temporary folder on the worker and returned as a tar archive, so the cluster needs
no shared filesystem; the driver unpacks it into ``<out>/trials/<cell>/seed-<s>/``.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from testbed.analysis.names import TRIAL_COMPLETED, TRIAL_DONE
from testbed.runner import run_scenario
from testbed.spec.load import LoadedScenario


@dataclass(frozen=True)
class TrialTask:
    """One trial handed to a worker (this process, a pool worker or a Ray task): what it needs to run
    the trial and where it writes. A sweep stage, not a job of the workload (docs/reference/glossary.md)."""
    rel_dir: str                # trials/<cell>/seed-<s>
    loaded: LoadedScenario      # the cell's scenario, validated by the driver
    seed: int
    substrate: str              # sim | netns | mininet (auto is resolved by the driver)
    out_dir: str                # absolute trial directory (written directly when not packing)
    argv: tuple[str, ...] = ()
    share: int = 0              # > 1: an emulation trial beside share - 1 others on this machine (a CPU share)


def _pack(run_dir: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(run_dir.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(run_dir)), recursive=False)
    return buf.getvalue()


def unpack(archive: bytes, dest: Path) -> None:
    """Extract a packed run directory to ``dest`` atomically (a hidden sibling, then a rename)."""
    tmp = dest.parent / f".{dest.name}.unpack-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse links and paths out of tmp
                tar.extractall(tmp, filter="data")
            else:  # pragma: no cover - our own archive, made by _pack
                tar.extractall(tmp)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# A trial whose run completed; DONE also takes "done", what trials recorded before (a resumed sweep
# keeps them; a Ray worker may run an older testbed).
COMPLETED, DONE = TRIAL_COMPLETED, TRIAL_DONE


@contextmanager
def _share(job: TrialTask, result: dict) -> Iterator[str | None]:
    """An emulation trial beside others (``job.share`` > 1): a run id, with this process in that run's
    CPU-share cgroup for the block (:mod:`testbed.sweep.share`; ``result["cpu_share"]`` says what it
    got). Otherwise nothing: None (run_scenario makes its own run id)."""
    if job.share <= 1:
        yield None
        return
    from testbed.netem.owned.naming import new_run_id
    from testbed.sweep.share import trial_share

    run_id = new_run_id()
    with trial_share(run_id, job.share) as share:
        result["cpu_share"] = share.describe()
        if share.why:
            print(f"cpu share: {share.why}", file=sys.stderr)
        yield run_id


def run_trial(job: TrialTask, pack: bool = False) -> dict:
    """Run one trial; return ``{status, error, traceback, wall_s, log, host, pid[, archive]}``."""
    log = io.StringIO()
    t0 = time.perf_counter()
    result: dict = {"rel_dir": job.rel_dir, "status": COMPLETED, "error": None, "traceback": None,
                    "host": os.uname().nodename, "pid": os.getpid()}
    tmp = Path(tempfile.mkdtemp(prefix="tb-sweep-")) if pack else None
    try:
        target = tmp / "run" if tmp is not None else Path(job.out_dir)
        try:
            with redirect_stdout(log), redirect_stderr(log), _share(job, result) as run_id:
                run_scenario(job.loaded, out_dir=target, substrate=job.substrate, seed=job.seed,
                             progress=False, force=True, argv=list(job.argv), plots=False, run_id=run_id)
        except Exception as e:  # recorded by the driver; the sweep goes on
            result.update(status="failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        if tmp is not None and result["status"] in DONE:
            result["archive"] = _pack(target)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    result["wall_s"] = time.perf_counter() - t0
    result["log"] = log.getvalue()
    return result
