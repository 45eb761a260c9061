#!/usr/bin/env bash
# The GPU check: the NVML power path end to end on a machine with an NVIDIA GPU, in one call of at
# most 8 minutes (testbed.power.gpu.gpu_check: doctor; `testbed calibrate power` at >= 4 caps with real
# training on the GPU; a one-site run with power.backend: nvml whose trace moves the cap, its node
# agent a local process, enforced = requested within 1 W, the original limit back at the end;
# SIGINT during a calibration puts the limit back; the same run on netns where namespaces can be made).
#   bash scripts/gpu-check.sh [--bundle DIR] [OUT]
# Made for an offline GPU machine (docs/how-to/gpu.md): bare, offline, Python 3.12 with CUDA torch and
# nvidia-ml-py but not testbed's other dependencies. With --bundle (made here by scripts/gpu-bundle.sh),
# what this Python lacks is installed from the bundle's wheels into a temporary folder (pip --no-index:
# nothing is fetched). OUT: $OUT when set (a folder the machine's job scheduler copies back), else
# results/gpu-check. It gets at most 6 small files: gpu-check.json, gpu-check.md, profile.yaml,
# logs.txt, environment.txt, compute-profile.json (a `testbed calibrate compute` entry of the GPU, written
# in the budget the check leaves). Exit 0: every step passed; 3: the only failures are "no GPU"; else 1.
# Env: PYTHON (default .venv/bin/python when there, else python3), GPU, CAPS, SECONDS_PER_CAP,
# FAMILY, NETNS (auto|on|off), DEVICE (the calibrations' torch device; default cuda:GPU, cpu only to
# rehearse with NVML mocked), GPU_CHECK_BUDGET_S (the whole check; default 480).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
T0=$SECONDS
BUNDLE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) BUNDLE=${2:?--bundle needs a folder}; shift 2 ;;
    --bundle=*) BUNDLE=${1#--bundle=}; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
DEST="${1:-${OUT:-results/gpu-check}}"
BUDGET_S=${GPU_CHECK_BUDGET_S:-480}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
mkdir -p "$DEST"
ENVF="$DEST/environment.txt"
: > "$ENVF"
say() { echo "$*" | tee -a "$ENVF"; }
NEEDED="import yaml, numpy, pandas, pyarrow, psutil, pydantic, pynvml, testbed.cli, testbed.substrate, testbed.power.gpu.gpu_check"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
say "python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
if ! "$PYTHON" -c "$NEEDED" 2>/dev/null; then
  if [[ -z "$BUNDLE" ]]; then
    say "error: this Python lacks what the check imports: $("$PYTHON" -c "$NEEDED" 2>&1 | tail -1)"
    say "  make a bundle where the package index is reachable (bash scripts/gpu-bundle.sh) and pass --bundle gpu-bundle"
    exit 1
  fi
  [[ -d "$BUNDLE" ]] || { say "error: no bundle folder $BUNDLE (copy it beside the checkout: scripts/gpu-bundle.sh makes it)"; exit 1; }
  SITE=$(mktemp -d "${TMPDIR:-/tmp}/tb-gpu-bundle-XXXXXX")
  trap 'rm -rf "$SITE"' EXIT
  # exactly the bundle's wheels (--no-deps: what the image has is not asked for again), from the folder only
  if ! timeout 60 "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
       --find-links "$BUNDLE" --target "$SITE" "$BUNDLE"/*.whl >>"$ENVF" 2>&1; then
    say "pip could not install the bundle: unpacking its wheels instead"
    "$PYTHON" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' "$SITE" "$BUNDLE"/*.whl
  fi
  export PYTHONPATH="$PWD:$SITE${PYTHONPATH#"$PWD"}"
  say "bundle: $(ls "$BUNDLE"/*.whl | wc -l) wheels from $BUNDLE installed into $SITE ($(( SECONDS - T0 )) s)"
  if ! "$PYTHON" -c "$NEEDED" >>"$ENVF" 2>&1; then
    say "error: still missing after the bundle: $("$PYTHON" -c "$NEEDED" 2>&1 | tail -1)"
    exit 1
  fi
fi
{
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())' 2>&1 | tail -1 || true
  "$PYTHON" -c 'import pynvml; pynvml.nvmlInit(); print("nvml driver", pynvml.nvmlSystemGetDriverVersion())' 2>/dev/null || echo "pynvml: not usable (no NVIDIA driver here)"
  if command -v nvidia-smi >/dev/null; then
    timeout 20 nvidia-smi --query-gpu=name,driver_version,power.limit,power.default_limit,power.min_limit,power.max_limit --format=csv 2>&1 || true
  else
    echo "nvidia-smi: none"
  fi
  echo "root: $([[ $(id -u) == 0 ]] && echo yes || echo no); setup took $(( SECONDS - T0 )) s"
} 2>&1 | tee -a "$ENVF"
left=$(( BUDGET_S - (SECONDS - T0) ))
# the whole check within its budget: SIGTERM (the check puts the GPU's limit back), then SIGKILL
rc=0
timeout --signal=TERM --kill-after=20 "$left" "$PYTHON" -m testbed.power.gpu.gpu_check --out "$DEST" --gpu "${GPU:-0}" \
  --caps "${CAPS:-4}" --seconds "${SECONDS_PER_CAP:-8}" --family "${FAMILY:-char-transformer}" --netns "${NETNS:-auto}" ${DEVICE:+--device "$DEVICE"} || rc=$?
# a compute-profile entry of this GPU (testbed calibrate compute --device cuda): only in the budget the
# check left (at most 90 s, at least 45), and only where the study's data set loads (scikit-learn's digits);
# it does not change the check's exit status, environment.txt says what happened
left=$(( BUDGET_S - (SECONDS - T0) ))
if (( left < 45 )); then
  say "compute profile: skipped (${left} s of the budget left, it needs 45)"
elif ! "$PYTHON" -c 'import sklearn, torch; assert torch.cuda.is_available()' 2>/dev/null; then
  say "compute profile: skipped (no CUDA device or no scikit-learn for the study's data set)"
elif timeout --signal=TERM --kill-after=5 $(( left < 90 ? left : 90 )) "$PYTHON" -m testbed calibrate compute \
     --device "cuda:${GPU:-0}" --seconds 5 --out "$DEST/compute-profile.json" >>"$ENVF" 2>&1; then
  say "compute profile: written ($DEST/compute-profile.json)"
else
  say "compute profile: failed (see above in environment.txt)"
fi
say "gpu-check.sh: exit $rc after $(( SECONDS - T0 )) s (budget $BUDGET_S s)"
exit "$rc"
