"""What the guest's pytest run reported, read from its JUnit XML (pure; unit-tested)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Case:
    nodeid: str  # "tests/integration/test_netem.py::test_delay"
    outcome: str  # passed | failed | error | skipped
    message: str = ""
    duration_s: float = 0.0


@dataclass(frozen=True)
class GuestReport:
    """The guest's test results, plus what the boot cost and what the tests measured."""

    returncode: int | None
    cases: tuple[Case, ...]
    measurements: tuple[dict, ...] = ()
    output: str = ""  # the guest's pytest output
    timing_s: dict = field(default_factory=dict)  # build (0 when cached), boot to userspace, total wall
    image: dict = field(default_factory=dict)  # the image manifest
    payload: dict = field(default_factory=dict)  # what the host packed for the guest (versions, bytes)

    def count(self, outcome: str) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome)

    @property
    def ok(self) -> bool:
        """Every collected test ran and passed: a failure, an error, a skip or nothing run is not ok."""
        return (self.returncode == 0 and bool(self.cases)
                and all(c.outcome == "passed" for c in self.cases))

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(o)} {o}" for o in ("passed", "failed", "error", "skipped") if self.count(o))
        return f"guest: {counts or 'no tests'} (pytest exit {self.returncode})"

    def to_json(self) -> dict:
        return {"ok": self.ok, "summary": self.summary(), **asdict(self)}

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")


def _nodeid(case: ET.Element) -> str:
    cls, name = case.get("classname", ""), case.get("name", "")
    parts = cls.split(".")
    # pytest writes classname "tests.integration.test_netem" (module) or "...test_x.TestY" (class)
    for i in range(len(parts), 0, -1):
        if parts[i - 1].startswith("test_"):
            module = "/".join(parts[:i]) + ".py"
            return "::".join([module, *parts[i:], name])
    return f"{cls}::{name}" if cls else name


def parse_junit(text: str) -> tuple[Case, ...]:
    """The test cases of a pytest JUnit XML report."""
    root = ET.fromstring(text)
    cases = []
    for tc in root.iter("testcase"):
        outcome, message = "passed", ""
        for child, kind in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(child)
            if el is not None:
                outcome, message = kind, (el.get("message") or "").strip()
                break
        cases.append(Case(_nodeid(tc), outcome, message, float(tc.get("time") or 0.0)))
    return tuple(cases)


def parse_measurements(text: str) -> tuple[dict, ...]:
    """JSON lines the guest's tests appended (``TESTBED_MEASUREMENTS``)."""
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())
