"""Run trials on a Ray cluster: one remote task per trial (``--ray ADDRESS``, or ``--ray local``).

Each task builds its run directory in a temporary folder on its node and returns it packed, so
the cluster needs no shared filesystem; the driver writes it under ``<out>/trials``. Every node
needs testbed installed (same version) and, for scenarios that read trace files, those files at
the same absolute paths. A failed or lost task is recorded as a failed trial (no retries: a trial
is deterministic, and a retry after a crash would hide it).

``local`` starts a private Ray instance with ``num_cpus`` CPUs for the sweep and shuts it down
afterwards; an ADDRESS (``auto``, ``ray://host:10001``, ``host:6379``) joins an existing cluster and
only disconnects from it: the address is checked first and the auth token found as Ray's CLI finds
it (:mod:`testbed.sweep.ray_connect`).
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import nullcontext
from typing import Callable

from testbed.errors import TestbedError
from testbed.sweep.ray_connect import _first_line, _forget_cached_token
from testbed.sweep.trial import TrialTask, run_trial


class RayUnavailable(TestbedError):
    exit_code = 2


def import_ray():
    try:
        with warnings.catch_warnings():
            # Ray's import pulls in modules that warn about their own dependencies (e.g. protobuf,
            # pkg_resources); they say nothing about this sweep.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            import ray
    except ImportError as e:
        raise RayUnavailable("--ray needs the 'ray' package: pip install -e '.[sweep]'") from e
    return ray


def _remote_trial(job: TrialTask) -> dict:
    import ray

    result = run_trial(job, pack=True)
    result["ray_node"] = ray.get_runtime_context().get_node_id()  # which node ran it (trial.json)
    return result


def _lost(job: TrialTask, error: BaseException) -> dict:
    return {"rel_dir": job.rel_dir, "status": "failed", "wall_s": None, "log": "", "traceback": None,
            "error": f"the Ray task failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}


def run_ray(jobs: list[TrialTask], address: str, *, num_cpus: int, cpus_per_trial: int, max_in_flight: int | None,
            on_result: Callable[[TrialTask, dict], None]) -> dict:
    """Run ``jobs`` as Ray tasks; ``on_result(job, result)`` as each one ends. Returns cluster facts."""
    ray = import_ray()
    local = address == "local"
    if local:
        target, auth = None, nullcontext()
    else:
        from testbed.sweep.ray_connect import joined_auth, parse_address

        target = parse_address(address)
        auth = joined_auth(target)
    with auth:
        return _run_tasks(ray, jobs, address, target.join if target else None, num_cpus=num_cpus,
                           cpus_per_trial=cpus_per_trial, max_in_flight=max_in_flight, on_result=on_result)


def _run_tasks(ray, jobs: list[TrialTask], address: str, join: str | None, *, num_cpus: int, cpus_per_trial: int,
                max_in_flight: int | None, on_result: Callable[[TrialTask, dict], None]) -> dict:
    init_kw = dict(include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        if join is None:
            _start_local(ray, num_cpus, init_kw)
        else:
            ray.init(address=join, **init_kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        ray.shutdown()  # whatever part of a local instance did start (its processes end with it)
        raise TestbedError(f"--ray {address}: cannot start or reach Ray: {_first_line(e)}") from e
    try:
        facts = {"address": address, "nodes": len([n for n in ray.nodes() if n.get("Alive")]),
                 "cluster_cpus": ray.cluster_resources().get("CPU"), "ray_version": ray.__version__}
        task = ray.remote(num_cpus=cpus_per_trial, max_retries=0)(_remote_trial)
        pending = list(jobs)
        in_flight: dict = {}
        try:
            _drive(ray, task, pending, in_flight, max_in_flight or len(jobs) or 1, on_result)
        except BaseException:
            for ref in in_flight:  # KeyboardInterrupt inside each running task: its substrate tears down
                ray.cancel(ref)
            raise
        return facts
    finally:
        ray.shutdown()


LOCAL_GCS_WAIT_S = 120  # Ray's default is 30 s; on 2 busy cores the GCS has been seen to need longer
LOCAL_START_TRIES = 2


def _start_local(ray, num_cpus: int, init_kw: dict) -> None:
    """Start the private instance of ``--ray local``. A GCS that does not come up (Ray waits for its
    port file) is given a longer wait than Ray's default, and one more try after a clean shutdown."""
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", str(LOCAL_GCS_WAIT_S))
    for attempt in range(LOCAL_START_TRIES):
        # the token an earlier cluster connection in this process cached is not the one the new
        # instance's GCS reads (~/.ray/auth_token): with it, every call is refused until the GCS wait ends
        _forget_cached_token()
        try:
            ray.init(num_cpus=num_cpus, **init_kw)
            return
        except (ConnectionError, RuntimeError) as e:
            ray.shutdown()
            if attempt + 1 == LOCAL_START_TRIES:
                raise
            print(f"warning: --ray local: Ray did not start ({_first_line(e)}); trying once more", file=sys.stderr)


def _drive(ray, task, pending: list, in_flight: dict, limit: int, on_result) -> None:
    """Keep at most ``limit`` tasks in flight; hand each result to ``on_result`` as it arrives."""
    while pending or in_flight:
        while pending and len(in_flight) < limit:
            job = pending.pop(0)
            in_flight[task.remote(job)] = job
        done, _ = ray.wait(list(in_flight), num_returns=1)
        for ref in done:
            job = in_flight.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as e:
                result = _lost(job, e)
            on_result(job, result)
