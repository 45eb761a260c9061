"""The tests this host's kernel cannot run (netem, the OVS kernel datapath) run in a qemu guest
(``testbed vm test``), and their results count here: this fails if any of them failed, errored,
or was skipped in the guest instead of run.

The first run builds the guest image (about 1.5 minutes, then cached); each boot and test run
takes about a minute and a half under software emulation.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vm, pytest.mark.root, pytest.mark.slow]
# Every test function the guest must run (parametrised ones count once per parameter set).
GUEST_TESTS = {
    "tests/integration/test_netem.py::test_netem_qdisc_tree_and_rate_change_in_place",
    "tests/integration/test_netem.py::test_netem_delay",
    "tests/integration/test_netem.py::test_netem_jitter",
    "tests/integration/test_netem.py::test_netem_loss",
    "tests/integration/test_netem.py::test_netem_goodput_under_delay",
    "tests/integration/test_netem.py::test_a_transfer_beside_competing_flows_netem_against_the_relay",
    "tests/integration/test_ovs.py::test_ovs_kernel_datapath_forwards",
    "tests/integration/test_ovs.py::test_netem_on_an_ovs_port",
    "tests/integration/test_net_live.py::test_net_set_changes_netem_delay_in_place",
}


def _our_qemus() -> set[int]:
    """PIDs of qemu processes whose command line names one of our output folders (``tb-vm-``)."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"qemu-system-x86_64") and any(b"tb-vm-" in a for a in cmd):
                pids.add(int(proc.name))
    return pids


@pytest.fixture(scope="module")
def guest_report():
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is not installed (bash scripts/setup.sh installs it as root)")
    from testbed.vm.run import run_guest_tests

    tmp_before = set(Path(tempfile.gettempdir()).glob("tb-vm-*"))
    qemus_before = _our_qemus()
    report = run_guest_tests(log=print)
    print(report.output)
    for m in report.measurements:
        print("measured in the guest:", m)
    print(report.summary(), report.timing_s)
    return report, tmp_before, qemus_before


def test_guest_ran_and_passed_every_netem_and_ovs_test(guest_report):
    report, _, _ = guest_report
    outcomes = {c.nodeid: c.outcome for c in report.cases}
    ran = {nodeid.split("[")[0] for nodeid in outcomes}
    assert GUEST_TESTS <= ran, f"not run in the guest: {sorted(GUEST_TESTS - ran)}"
    not_passed = {k: v for k, v in outcomes.items() if v != "passed"}
    assert not not_passed, f"{not_passed}\n{report.output}"
    assert report.ok and report.returncode == 0


def test_guest_measured_what_was_configured(guest_report):
    report, _, _ = guest_report
    by_test: dict[str, list[dict]] = {}
    for m in report.measurements:
        by_test.setdefault(m["test"], []).append(m)
    assert {"delay", "jitter", "loss", "goodput", "contention"} <= set(by_test)
    # netem and the relay side by side, beside 1 and 4 competing flows (docs/measured/benchmarks.md)
    assert {(m["shaper"], m["competing_flows"]) for m in by_test["contention"]} == {
        (shaper, n) for shaper in ("netem", "relay") for n in (1, 4)}
    for d in by_test["delay"]:
        added = d["ping_median_ms"] - d["base_rtt_ms"]
        assert abs(added - d["configured_rtt_ms"]) <= 1.0 + 0.05 * d["configured_rtt_ms"]
    loss = by_test["loss"][0]
    assert abs(loss["measured_pct"] - loss["configured_pct"]) <= 3.0


def test_guest_left_nothing_behind(guest_report):
    _, tmp_before, qemus_before = guest_report
    assert set(Path(tempfile.gettempdir()).glob("tb-vm-*")) <= tmp_before  # output folders removed
    assert _our_qemus() <= qemus_before  # qemu ended
