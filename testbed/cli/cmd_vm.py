"""``testbed vm test|build|clean``: the netem/OVS-capable qemu guest for tests this kernel cannot run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vm", help="a netem/OVS-capable Debian guest under qemu for the tests this kernel cannot run")
    vm = p.add_subparsers(dest="vm_command", metavar="ACTION")
    vm.required = True

    t = vm.add_parser("test", help="build (once, cached) and boot the guest, run the netem/OVS tests in it, "
                                   "report their results; exit 1 unless every one of them ran and passed")
    t.add_argument("tests", nargs="*", help="test paths relative to the repository (default: the guest's tests)")
    t.add_argument("-m", "--marker", default=None, help="pytest -m expression (default: 'netem or ovs')")
    t.add_argument("--timeout-s", type=float, default=None, help="hard limit on the guest's run (default 420)")
    t.add_argument("--rebuild", action="store_true", help="build the image again even if it is cached")
    t.add_argument("--accel", choices=("tcg", "kvm"), default="tcg",
                   help="qemu accelerator: tcg (software emulation, default) or kvm where it works (not here: PVM)")
    t.add_argument("--junit", type=Path, default=None, help="copy the guest's JUnit XML report here")
    t.add_argument("--json", type=Path, default=None, help="write the report (cases, measurements, timings) here")
    t.add_argument("--keep", type=Path, default=None, help="copy the guest's whole output folder here (console log)")
    t.set_defaults(func=_test)

    b = vm.add_parser("build", help="build the guest image into the cache (root) and print where it is")
    b.add_argument("--rebuild", action="store_true", help="build it again even if it is cached")
    b.set_defaults(func=_build)

    c = vm.add_parser("clean", help="remove every cached guest image")
    c.set_defaults(func=_clean)


def _check_test_args(args: argparse.Namespace) -> None:
    """Refuse bad values before the image is built or the guest booted (minutes)."""
    import math

    from testbed.errors import OutDirError, SpecError
    from testbed.recorder.out_dir import check_out_dir, check_out_file

    problems = []
    if args.timeout_s is not None and not (math.isfinite(args.timeout_s) and 0 < args.timeout_s <= 86400):
        problems.append(("--timeout-s", "must be > 0 and <= 86400 seconds"))
    for flag, path in (("--junit", args.junit), ("--json", args.json)):
        if path is not None:
            try:
                check_out_file(path, flag=flag)
            except OutDirError as e:
                problems.append((flag, f"{path}: {e.why}"))
    from testbed.vm.run import repo_root

    repo = repo_root().resolve()
    for t in args.tests:
        f = (repo / t.split("::")[0]).resolve()
        if f != repo and repo not in f.parents:
            problems.append(("TESTS", f"{t}: not inside the repository {repo}"))
        elif not f.exists():
            problems.append(("TESTS", f"{t}: no such test file in {repo}"))
    if args.keep is not None:
        try:
            check_out_dir(args.keep, kind="run", flag="--keep")
        except OutDirError as e:
            problems.append(("--keep", f"{args.keep}: {e.why} (give a new or empty directory)"))
    if problems:
        raise SpecError(problems)


def _test(args: argparse.Namespace) -> int:
    from testbed.vm.run import DEFAULT_TIMEOUT_S, GUEST_MARKER, GUEST_TESTS, run_guest_tests

    _check_test_args(args)

    report = run_guest_tests(tests=tuple(args.tests) or GUEST_TESTS, marker=args.marker or GUEST_MARKER,
                             timeout_s=args.timeout_s or DEFAULT_TIMEOUT_S, rebuild=args.rebuild,
                             junit_out=args.junit, keep_out=args.keep, accel=args.accel, log=_log)
    print(report.output.rstrip())
    for m in report.measurements:
        print("measured in the guest:", json.dumps(m))
    t = report.timing_s
    print(f"vm: image {report.image.get('key')} ({'built in %.0f s' % t['build'] if t['build'] else 'cached'}), "
          f"guest userspace at {t['boot_to_userspace']} s, guest {t['guest_wall']} s, total {t['total']} s")
    if args.json:
        report.write_json(args.json)
    print(report.summary())
    if not report.ok:
        bad = [c for c in report.cases if c.outcome != "passed"]
        for c in bad:
            print(f"  {c.outcome}: {c.nodeid}{': ' + c.message if c.message else ''}", file=sys.stderr)
        if not report.cases:
            print("  the guest collected no tests", file=sys.stderr)
        return 1
    return 0


def _build(args: argparse.Namespace) -> int:
    from testbed.vm.image import ensure_image

    img = ensure_image(force=args.rebuild, log=_log)
    print(f"{img.dir}  ({img.manifest['kernel_release']}, built {img.manifest['built_at']} "
          f"in {img.manifest['build_s']} s)")
    return 0


def _clean(args: argparse.Namespace) -> int:
    from testbed.vm.image import clean, default_cache_dir

    removed = clean()
    print(f"removed {len(removed)} cached image(s) from {default_cache_dir()}" if removed else "nothing cached")
    return 0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
