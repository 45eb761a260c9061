"""``testbed validate`` against a corpus of malformed, hostile and oversized scenario and sweep files.

Every file in ``tests/corpus/scenarios`` and ``tests/corpus/sweeps`` says in its header what
must happen (``# expect: 2`` or ``0``, ``# expect-in-output: TEXT``, ``# run: sim``); a few more
cases are generated here because they are huge or deep (a 2 GB sparse trace, YAML nested 10,000
levels, 10,000 sites, a 20 MB scenario). Each file is validated by its own ``python -m testbed
validate`` process under a 60 s timeout and a 4 GB address-space limit, two at a time. Checked:
the exit status; every output line names the file; the expected field or text appears; no
traceback; no secret (planted in the files the hostile cases point at, and in the environment
that ``/proc/self/environ`` shows) and nothing of ``/etc/shadow`` is ever printed. Valid files are
then run with ``testbed run --substrate sim``: exit 0 or 2, within the same bounds, and no
``.partial-*`` left beside the results.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

CORPUS = ROOT / "tests" / "corpus"
SECRET = f"CORPUS-SECRET-{uuid.uuid4().hex}"
TIMEOUT_S = 60
ADDRESS_SPACE_BYTES = 4 * 1024**3


def _limits() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def _testbed(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TESTBED_CORPUS_SECRET": SECRET, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "testbed", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, preexec_fn=_limits, stdin=subprocess.DEVNULL)


@dataclass(frozen=True)
class Case:
    name: str
    source: Path | None           # the committed file (None: generated here)
    expect: int
    needle: str | None
    run: bool


def _header(text: str) -> tuple[int, str | None, bool]:
    expect = re.search(r"^# expect: (\d+)$", text, re.M)
    needle = re.search(r"^# expect-in-output: (.+)$", text, re.M)
    assert expect, "corpus file without '# expect:'"
    return int(expect.group(1)), needle.group(1) if needle else None, bool(re.search(r"^# run: sim$", text, re.M))


def _committed() -> list[Case]:
    cases = []
    for folder in ("scenarios", "sweeps"):
        for path in sorted((CORPUS / folder).glob("*.yaml")):
            expect, needle, run = _header(path.read_bytes().decode("utf-8", "replace"))
            cases.append(Case(f"{folder}/{path.stem}", path, expect, needle, run))
    return cases


BASE = (CORPUS / "sweeps" / "base.yaml").read_text().split("\n", 2)[2]  # without its two header lines


def _generated(tmp: Path) -> dict[str, tuple[str, int, str]]:
    """name -> (file text, expected exit, text expected in the output); huge or deep, so made here."""
    many = yaml.safe_load(BASE)
    many["sites"] = [{"name": f"s{i}", "lat_deg": i % 80, "lon_deg": i % 170} for i in range(10_000)]
    many["links"] = [{"a": "s0", "b": f"s{i}", "bandwidth_gbps": 1} for i in range(1, 10_000)]
    for job in many["workloads"]["jobs"]:
        job["origin"] = "s0"
    body = yaml.safe_dump(many)
    return {
        "deep_flow_10000": ("name: deep\ndescription: " + "[" * 10_000 + "]" * 10_000 + "\n" + BASE.split("\n", 1)[1],
                            2, "nested more than"),
        "deep_block_3000": ("".join("  " * i + f"k{i}:\n" for i in range(3000)) + "  " * 3000 + "v: 1\n", 2,
                            "nested more than"),
        "deep_mapping_in_jobs": (BASE.replace("jobs:\n", "jobs:\n  - " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", 1), 2,
                                 "nested more than"),
        "alias_bomb_10e12": ("".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else "1"] * 16) + "]\n"
                                     for i in range(12)) + BASE, 2, "alias"),
        "sites_10000": (body, 2, "limits."),
        "scenario_20mb": (None, 2, "limit"),  # sparse file: see _make
        "sweep_deep": ("scenario: base.yaml\ngrid:\n  duration_h: " + "[" * 20_000 + "]" * 20_000 + "\n", 2,
                       "nested more than"),
    }


def _secrets(folder: Path) -> None:
    """The files the hostile cases point at: each holds SECRET where a careless message would quote it."""
    folder.mkdir()
    (folder / "header.csv").write_text(f"{SECRET},other\n1,2\n")
    (folder / "value.csv").write_text(f"timestamp,value\n0,{SECRET}\n3600,1\n")
    (folder / "time.csv").write_text(f"timestamp,value\n{SECRET},1\n2024-06-03T01:00:00Z,1\n")
    (folder / "binary.csv").write_bytes(b"timestamp,value\n0," + SECRET.encode() + b"\xff\xfe\x00\x81\n")
    (folder / "caiso.csv").write_text("Date,Hour,Interval,Wind Curtailment,Solar Curtailment,Reason\n"
                                      f"{SECRET},1,1,0,1,L\n")
    (folder / "google.csv").write_text(f"time,cell,pdu,measured_power_util,production_power_util\n{SECRET},a,b,0.5,0.5\n")
    (folder / "fake.csv.gz").write_text(f"{SECRET}\n")
    (folder / "topology.yaml").write_text(f"sites: {SECRET}\nlinks: [{SECRET}]\nname: {{x: {SECRET}}}\n{SECRET}-a: 1\n"
                                          f"{SECRET}-b:\n{SECRET}:*:19000:0:99999:7:::\n")
    (folder / "scenario.yaml").write_text(f"{SECRET}: 1\n{SECRET}-b:\nname: {{{SECRET}: 2}}\n")
    (folder / "broken.yaml").write_text(f"sites:\n  - name: a\n\t{SECRET}: [\n")
    (folder / "profile.yaml").write_text(f"name: p\nmin_w: {SECRET}\nmax_w: 300\nidle_w: 10\npoints: [[1, {SECRET}, 3]]\n")
    (folder / "shadow_link.csv").symlink_to("/etc/shadow")
    os.mkfifo(folder / "trace.fifo")
    _bombs(folder)
    with open(folder / "wide.csv", "w") as f:  # one 20 MB line: 10 million columns
        f.write("," * 10_000_000 + "\n0\n")
    with open(folder / "huge.csv", "wb") as f:  # 2 GB, sparse: costs no disk
        f.write(b"timestamp,value\n0,1\n")
        f.truncate(2 * 1024**3)


def _bombs(folder: Path) -> None:
    """A .xlsx (zip) and a .csv.gz of about 300 kB each that expand to 300 MB of zeros."""
    import gzip
    import zipfile

    block = bytes(1 << 20)
    with zipfile.ZipFile(folder / "bomb.xlsx", "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as member:
            for _ in range(300):
                member.write(block)
    with gzip.open(folder / "bomb.csv.gz", "wb", compresslevel=1) as f:
        f.write(b"time,cell,pdu,measured_power_util,production_power_util\n")
        for _ in range(300):
            f.write(block)


def _production_only_workbook(path: Path) -> None:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Production"
    sheet.append(["Date", "Hour", "Interval", "Load", "Solar"])
    sheet.append(["06/03/2024", 1, 1, 20000, 0])
    book.save(path)


def _shadow_tokens() -> list[str]:
    """Pieces of /etc/shadow no output may contain: password hashes, and whole lines (user:hash:...)."""
    try:
        text = Path("/etc/shadow").read_text(errors="replace")
    except OSError:
        return []
    hashes = {tok for line in text.splitlines() for tok in line.split(":")[1:2] if len(tok) >= 8}
    lines = {line.rstrip(":") for line in text.splitlines() if line.count(":") >= 2}
    return sorted(hashes | lines)


@dataclass
class Outcome:
    case: Case
    path: Path
    returncode: int | None        # of its own process, or (batch) 0 if its one line says ok, else 2
    lines: list[str]              # the output lines naming it (a batch's lines are split by file)
    stderr: str
    run: subprocess.CompletedProcess | None = None
    run_dir: Path | None = None
    error: str | None = None


ISOLATED = re.compile(r"^(generated/|path/|scenarios/(yaml_alias|secret_(dev|proc|fifo|huge|etc|zip|gzip|wide)|size_|fl_training)|"
                      r"sweeps/sweep_(alias|grid|too_many|size))")
"""Cases validated by a process of their own: those that attack memory, time or the file system.
The rest are validated in batches (``validate F1 F2 ...``: one line per problem, each naming its
file), under the same time and memory bounds per batch."""


def _prepare(tmp: Path) -> list[tuple[Case, Path]]:
    secrets, data = tmp / "secrets", tmp / "data"
    _secrets(secrets)
    data.mkdir()
    _production_only_workbook(data / "production_only.xlsx")
    out = []
    for case in _committed():
        raw = case.source.read_bytes()
        if b"@" in raw:  # placeholders for the files made here
            folder = tmp / "corpus" / case.source.parent.name
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / case.source.name
            text = raw.decode("utf-8").replace("@SECRETS@", str(secrets)).replace("@DATA@", str(data))
            target.write_text(text.replace("../data/", f"{CORPUS / 'data'}/"))
        else:
            target = case.source
        out.append((case, target))
    gen_dir = tmp / "corpus" / "generated"  # beside a copy of base.yaml, which the generated sweep names
    gen_dir.mkdir(parents=True, exist_ok=True)
    (gen_dir / "base.yaml").write_text(BASE)
    for name, (text, expect, needle) in _generated(tmp).items():
        path = gen_dir / f"{name}.yaml"
        if text is None:
            with open(path, "wb") as f:
                f.write(b"name: big\n")
                f.truncate(20 * 1024**2)
        else:
            path.write_text(text)
        out.append((Case(f"generated/{name}", None, expect, needle, False), path))
    for name, path, needle in _special_paths(tmp):
        out.append((Case(f"path/{name}", None, 2, needle, False), path))
    return out


def _special_paths(tmp: Path) -> list[tuple[str, Path, str]]:
    """Not files at all, given to validate directly: name, path, text expected in the output."""
    fifo = tmp / "scenario.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    return [("dev_zero", Path("/dev/zero"), "under /dev"), ("proc_environ", Path("/proc/self/environ"), "under /proc"),
            ("fifo", fifo, "fifo"), ("directory", tmp, "directory"), ("missing", tmp / "nope.yaml", "not found"),
            ("etc_shadow", Path("/etc/shadow"), "shadow")]


def _lines(v: subprocess.CompletedProcess) -> tuple[list[str], list[str]]:
    """(every report line, the problem lines) with the `error: ` prefix of problems taken off; a
    problem line without it is kept whole, so the checks on the file name catch it."""
    problems = [ln.removeprefix("error: ") for ln in v.stderr.splitlines() if ln.strip()]
    return [ln for ln in v.stdout.splitlines() if ln.strip()] + problems, problems


def _validate_one(case: Case, path: Path, tmp: Path) -> Outcome:
    try:
        v = _testbed(["validate", str(path)], cwd=tmp)
    except subprocess.TimeoutExpired:
        return Outcome(case, path, None, [], "", error=f"validate ran past {TIMEOUT_S} s")
    assert all(ln.startswith("error: ") for ln in v.stderr.splitlines() if ln.strip()), v.stderr
    lines, problems = _lines(v)
    return Outcome(case, path, v.returncode, lines, "\n".join(problems))


def _validate_batch(batch: list[tuple[Case, Path]], tmp: Path) -> list[Outcome]:
    try:
        v = _testbed(["validate", *(str(p) for _, p in batch)], cwd=tmp)
    except subprocess.TimeoutExpired:
        return [Outcome(c, p, None, [], "", error=f"batch validate ran past {TIMEOUT_S} s") for c, p in batch]
    assert all(ln.startswith("error: ") for ln in v.stderr.splitlines() if ln.strip()), v.stderr
    lines, problems = _lines(v)
    out = []
    for case, path in batch:
        mine = [ln for ln in lines if ln.startswith((f"{path}:", f"{path} "))]
        ok = len(mine) == 1 and ": ok (" in mine[0]
        err = "\n".join(ln for ln in mine if ln in problems)
        out.append(Outcome(case, path, 0 if ok else 2, mine, err))
    stray = [ln for ln in lines if not any(ln.startswith(f"{p}:") for _, p in batch)]
    expected_rc = 2 if any(o.returncode for o in out) else 0
    for o in out:
        if stray:
            o.error = f"lines naming no file: {stray}"
        elif v.returncode != expected_rc:
            o.error = f"batch exit {v.returncode}, expected {expected_rc}"
    return out


def _run(o: Outcome, tmp: Path) -> Outcome:
    if not (o.case.run and o.returncode == 0):
        return o
    o.run_dir = tmp / "runs" / o.case.name.replace("/", "-")
    o.run_dir.mkdir(parents=True)
    try:
        o.run = _testbed(["run", str(o.path), "--substrate", "sim", "--out", str(o.run_dir / "out"), "--no-progress"],
                         cwd=tmp)
    except subprocess.TimeoutExpired:
        o.error = f"run ran past {TIMEOUT_S} s"
    return o


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Outcome]:
    tmp = tmp_path_factory.mktemp("corpus")
    todo = _prepare(tmp)
    alone = [item for item in todo if ISOLATED.match(item[0].name)]
    rest = [item for item in todo if item not in alone]
    batches = [rest[i::2] for i in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(_validate_batch, b, tmp) for b in batches if b]
        jobs += [pool.submit(_validate_one, c, p, tmp) for c, p in alone]
        results: list[Outcome] = []
        for job in jobs:
            r = job.result()
            results += r if isinstance(r, list) else [r]
        results = list(pool.map(lambda o: _run(o, tmp), results))
    return {o.case.name: o for o in results}


def _case_names() -> list[str]:
    return ([c.name for c in _committed()] + [f"generated/{n}" for n in _generated(Path("/nonexistent"))]
            + [f"path/{n}" for n in ("dev_zero", "proc_environ", "fifo", "directory", "missing", "etc_shadow")])


def test_corpus_is_large_and_covers_every_category():
    cases = _committed()
    assert len(cases) >= 60
    prefixes = {c.name.split("/")[1].split("_")[0] for c in cases}
    assert {"num", "bool", "yaml", "trace", "secret", "size", "extreme", "sweep", "field", "fl"} <= prefixes
    assert sum(c.expect == 0 for c in cases) >= 5 and sum(c.run for c in cases) >= 5


@pytest.mark.parametrize("name", _case_names())
def test_validate(outcomes, name):
    o = outcomes[name]
    assert o.error is None, o.error
    out = "\n".join(o.lines)
    assert o.returncode == o.case.expect, out
    assert "Traceback" not in out, out
    assert SECRET not in out and "CORPUS-TAG-PAYLOAD" not in out, out
    for token in _shadow_tokens():
        assert token not in out
    assert o.lines, "no output"
    assert all(line.startswith(str(o.path)) for line in o.lines), out
    if o.case.expect == 0:
        assert len(o.lines) == 1 and ": ok (" in o.lines[0], out
        assert not o.stderr.strip(), o.stderr
    else:
        # one line per problem: each names the file, then a field (or a line number) and a message
        assert all(re.match(rf"^{re.escape(str(o.path))}(:\d+)?: \S", line) for line in o.lines), out
        assert o.stderr.strip(), "problems go to stderr"
        if o.case.needle:
            assert o.case.needle in out, out


@pytest.mark.parametrize("name", [c.name for c in _committed() if c.run])
def test_valid_files_run_on_sim_and_leave_nothing_behind(outcomes, name):
    o = outcomes[name]
    assert o.error is None, o.error
    assert o.run is not None, "valid file was not run"
    out = o.run.stdout + o.run.stderr
    assert o.run.returncode in (0, 2), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert SECRET not in out
    leftovers = [p.name for p in o.run_dir.iterdir() if p.name.startswith(".")]
    assert not leftovers, leftovers
    if o.run.returncode == 0:
        assert (o.run_dir / "out" / "comparison.md").is_file()
