"""``run_guest_tests``: image (cached or built), boot, the guest's pytest, its report here."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from testbed.vm import guest, image, payload
from testbed.vm.errors import VmError
from testbed.vm.report import GuestReport, parse_junit, parse_measurements

# The tests this host's kernel cannot run and the guest's can (paths relative to the repository).
GUEST_TESTS = ("tests/integration/test_netem.py", "tests/integration/test_ovs.py", "tests/integration/test_net_live.py")
GUEST_MARKER = "netem or ovs"
DEFAULT_TIMEOUT_S = 420.0


def repo_root() -> Path:
    """The checkout this package runs from (``testbed vm test`` shares it with the guest)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / "tests").is_dir():
        raise VmError(f"{root} is not a testbed checkout with tests/ (install with pip install -e .)")
    return root


def run_guest_tests(*, tests: tuple[str, ...] = GUEST_TESTS, marker: str = GUEST_MARKER,
                    repo: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, rebuild: bool = False,
                    junit_out: Path | None = None, keep_out: Path | None = None, accel: str = "tcg",
                    log: Callable[[str], None] = print) -> GuestReport:
    """Run ``tests`` (``-m marker``) in the guest and return what they reported.

    Raises :class:`VmError` when the guest cannot be built or booted, or reports nothing (a
    timeout included); failing tests are *not* an error here: see ``report.ok``."""
    repo = repo or repo_root()
    missing = [t for t in tests if not (repo / t.split("::")[0]).exists()]
    if missing:
        raise VmError(f"no such test file(s) in {repo}: {missing}")
    t0 = time.monotonic()
    was_cached = not rebuild and image.cached(image.resolve_inputs()) is not None
    img = image.ensure_image(force=rebuild, log=log)
    build_s = 0.0 if was_cached else time.monotonic() - t0
    log(f"vm: booting {img.dir.name} ({img.manifest['kernel_release']}) under qemu -accel {accel}, "
        f"timeout {timeout_s:.0f} s")
    packed: dict = {}
    res = guest.boot(img, guest.pytest_job(list(tests), marker), timeout_s=timeout_s, accel=accel,
                     prepare=lambda out: packed.update(payload.write(out / "payload.tar", repo)))
    try:
        if keep_out is not None:
            shutil.copytree(res.out, keep_out, dirs_exist_ok=True)
        if res.timed_out:
            raise VmError(f"the guest did not finish within {timeout_s:.0f} s (qemu ended by PID); "
                          f"console tail:\n{res.console[-3000:]}")
        junit = res.out / "junit.xml"
        if res.returncode is None or not junit.exists():
            raise VmError(f"the guest reported no test results; console tail:\n{res.console[-3000:]}")
        if junit_out is not None:
            shutil.copyfile(junit, junit_out)
        meas = res.out / "measurements.jsonl"
        pytest_log = res.out / "pytest.log"
        return GuestReport(
            returncode=res.returncode, cases=parse_junit(junit.read_text()),
            measurements=parse_measurements(meas.read_text()) if meas.exists() else (),
            output=pytest_log.read_text(errors="replace") if pytest_log.exists() else "",
            timing_s={"build": round(build_s, 1), "boot_to_userspace": res.userspace_s,
                      "guest_wall": round(res.wall_s, 1), "total": round(time.monotonic() - t0, 1)},
            image={k: img.manifest.get(k) for k in ("key", "kernel_release", "guest_python", "built_at")},
            payload=packed,
        )
    finally:
        shutil.rmtree(res.out, ignore_errors=True)
