#!/usr/bin/env bash
# The GPU check's bundle: here (with the package index), the wheels the offline GPU machine lacks, so that
# scripts/gpu-check.sh can run there bare and offline. The machine's image (docs/how-to/gpu.md) has
# Python 3.12 with CUDA PyTorch, nvidia-ml-py, numpy, pandas, pyarrow, psutil, PyYAML, scikit-learn,
# matplotlib, tqdm, pytest; the bundle is every other package testbed needs for the check (its
# pyproject dependencies and the emulation extra, with their dependencies), computed from the
# versions installed in .venv, as CPython 3.12 manylinux x86-64 or pure-Python wheels. testbed itself
# is not in it: the working tree travels with the command and gpu-check.sh puts it on PYTHONPATH.
#   bash scripts/gpu-bundle.sh [DIR]     # default gpu-bundle/ (ignored by git); prints the command to run
# Env: PYTHON (the python whose installed versions are bundled; default .venv/bin/python).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DIR=${1:-gpu-bundle}
PY=${PYTHON:-.venv/bin/python}
MAX_MIB=30
IMAGE="torch nvidia-ml-py numpy pandas pyarrow psutil PyYAML scikit-learn matplotlib tqdm pytest"
EXTRAS="emulation"  # pyroute2: the netns step, doctor's probes
# Not bundled: the check never imports them (pvlib, with h5py and requests, is imported only for solar
# traces; the check's scenario replays a CSV trace) and pvlib alone is 19 MiB of its own data.
SKIP=${GPU_BUNDLE_SKIP-pvlib}
[[ -x "$PY" ]] || { echo "error: $PY not found (bash scripts/setup.sh --no-run makes .venv)" >&2; exit 1; }

# name==version of each package to bundle: the closure of testbed's requirements (Python 3.12 on
# Linux x86-64) minus the closure of the image's packages; typing_extensions is bundled anyway
# (pydantic needs a recent one; an older one in the image would break its import)
reqs=$("$PY" - "$IMAGE" "$EXTRAS" "$SKIP" <<'PY'
import importlib.metadata as md, sys, tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
image, extras, skip = sys.argv[1].split(), sys.argv[2].split(), {canon(n) for n in sys.argv[3].split()}
env = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython"}
def ok(r, extra=""):
    return r.marker is None or r.marker.evaluate({**env, "extra": extra})
def closure(names):
    seen, todo = {}, list(names)
    while todo:
        r = todo.pop()
        n = canon(r.name)
        if n in seen:
            continue
        try:
            dist = md.distribution(r.name)
        except md.PackageNotFoundError:
            sys.exit(f"error: {r.name} is not installed in this python: cannot bundle it")
        seen[n] = dist.version
        for s in dist.requires or []:
            q = Requirement(s)
            if any(ok(q, e) for e in ["", *r.extras]):
                todo.append(q)
    return seen
proj = tomllib.load(open("pyproject.toml", "rb"))["project"]
top = [Requirement(s) for s in proj["dependencies"]]
top += [Requirement(s) for e in extras for s in proj["optional-dependencies"][e]]
have = closure(Requirement(n) for n in image)
need = closure(r for r in top if ok(r) and canon(r.name) not in {*have, *skip})
for n, v in sorted(need.items()):
    if n not in have or n == "typing-extensions":
        print(f"{n}=={v}")
PY
)
echo "== not bundled (the check does not import them): ${SKIP:-nothing}"
echo "== bundling for CPython 3.12 manylinux x86-64 into $DIR/: $(echo $reqs | tr '\n' ' ')"
rm -rf "$DIR"
mkdir -p "$DIR"
# shellcheck disable=SC2086
"$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --dest "$DIR" \
  --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --platform linux_x86_64 --platform any $reqs 2>&1 | grep -v "^WARNING: Location" || true
n_want=$(echo "$reqs" | wc -w)
n_got=$(ls "$DIR"/*.whl 2>/dev/null | wc -l)
[[ "$n_got" == "$n_want" ]] || { echo "error: $n_got wheels for $n_want packages in $DIR" >&2; exit 1; }
echo "$reqs" > "$DIR/requirements.txt"
size_kib=$(du -sk "$DIR" | cut -f1)
echo "== $DIR/: $n_got wheels, $((size_kib / 1024)).$(( (size_kib % 1024) * 10 / 1024 )) MiB (limit $MAX_MIB MiB)"
(( size_kib < MAX_MIB * 1024 )) || { echo "error: the bundle is over $MAX_MIB MiB" >&2; exit 1; }
echo "== on the GPU machine, from the repository root, with '$DIR' copied beside the checkout (it is git-ignored):"
echo "bash scripts/gpu-check.sh --bundle $DIR"
