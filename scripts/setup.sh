#!/usr/bin/env bash
# One command: set up testbed in ./.venv and run the quick-start scenario end to end.
#   bash scripts/setup.sh            # set up, then run scenarios/quickstart.yaml
#   bash scripts/setup.sh --no-run   # set up only (used by scripts/test.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run=1
[ "${1:-}" = "--no-run" ] && run=0

# System packages for network emulation (namespaces + tc, Mininet, iperf3) and the docker runtime
# of node agents (a private dockerd, a registry-free base image from debootstrap); qemu and
# e2fsprogs for `testbed vm test` (a netem/OVS-capable guest); vagrant so CI can check the
# Vagrantfile (`vagrant validate`); python3-venv for `python3 -m venv` (Debian ships it apart: the one
# the simulator needs too). Installed only when running as root with apt and only if something is missing.
APT_PKGS="python3-venv iproute2 iperf3 ethtool gcc libc6-dev mininet openvswitch-switch bridge-utils iputils-ping docker.io debootstrap qemu-system-x86 e2fsprogs vagrant chromium"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=""
  for p in $APT_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    echo "== installing system packages:$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
elif [ "$(id -u)" != 0 ]; then
  echo "== not root: skipping system packages ($APT_PKGS); network emulation needs root anyway"
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "testbed needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv || { echo "error: $PY -m venv failed (Debian/Ubuntu: apt-get install python3-venv, which this script installs when run as root)" >&2; rm -rf .venv; exit 1; }
fi
echo "== installing testbed and its dependencies into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
# torch: the CPU build (a bare 'torch' from the package index pulls GBs of CUDA wheels). First a
# torch wheel pip can already find without a network (its find-links, e.g. a local wheel folder),
# then PyTorch's CPU index alone (TORCH_INDEX overrides it, e.g. a CUDA one). A torch already in
# .venv within the range pyproject.toml asks for is kept.
TORCH_RANGE='torch>=2.4,<3'
TORCH_INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
torch_ok() {
  .venv/bin/python -c 'import sys, torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(not (2, 4) <= v < (3, 0))' 2>/dev/null
}
pipq() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
if ! torch_ok; then
  if .venv/bin/python -m pip install -q --disable-pip-version-check --no-index --no-deps "$TORCH_RANGE" >/dev/null 2>&1; then
    echo "== installed $TORCH_RANGE from a wheel pip finds locally; its dependencies from the package index"
    pipq "$TORCH_RANGE"
  else
    echo "== installing $TORCH_RANGE from $TORCH_INDEX"
    pipq --timeout 30 --retries 1 --index-url "$TORCH_INDEX" "$TORCH_RANGE"
  fi
  torch_ok || { echo "error: could not install $TORCH_RANGE (no torch wheel pip finds locally, and $TORCH_INDEX failed); set TORCH_INDEX to a reachable index with a CPU build" >&2; exit 1; }
fi
# extras: emulation (pyroute2) and xlsx (openpyxl) are platform-only; the simulator needs neither
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,emulation,xlsx,train,gpu,sweep]' 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import testbed, pandas, pvlib, pydantic, pyroute2, openpyxl, torch" || { echo "installation failed" >&2; exit 1; }

# The compiled delay relay (testbed/netem/relay/fastrelay): built here with the system C compiler; without
# it, delayed links fall back to the Python relay.
if .venv/bin/python -m testbed.netem.relay.fastrelay build >/dev/null; then
  echo "== built the compiled delay relay (testbed/netem/relay/fastrelay/build/fastrelay)"
else
  echo "== compiled delay relay not built: delayed links use the Python relay"
fi

# Mininet from the distribution: the Debian package's mnexec is what starts hosts, and its Python
# package (same version) is linked into .venv so the mininet substrate imports exactly that one.
DIST_MININET=/usr/lib/python3/dist-packages/mininet
if [ -d "$DIST_MININET" ]; then
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if .venv/bin/python -m pip show -q mininet >/dev/null 2>&1; then
    echo "== replacing the package index's mininet in .venv with the distribution's ($DIST_MININET)"
    .venv/bin/python -m pip uninstall -q -y mininet
  fi
  [ -e "$site/mininet" ] || ln -s "$DIST_MININET" "$site/mininet"
  .venv/bin/python -c "import mininet.net" || { echo "the distribution's mininet does not import in .venv" >&2; exit 1; }
elif [ "$(id -u)" = 0 ]; then
  echo "== no $DIST_MININET: the mininet substrate will be unavailable (apt-get install mininet)"
fi

# The GPU check's rehearsal (tests/integration/test_gpu_check_rehearsal.py) needs a stand-in of the
# offline GPU machine's image: a Python 3.12 virtual environment with only that image's packages (CUDA
# torch from the package index, which runs on the CPU). Built once, as root (CI): ~2 minutes and
# ~5 GB in ~/.cache/testbed/gpu-rehearsal-py312, then reused. TESTBED_GPU_REHEARSAL=0 skips it.
if [ "$(id -u)" = 0 ] && [ "${TESTBED_GPU_REHEARSAL:-1}" != 0 ]; then
  if bash scripts/gpu-rehearsal-env.sh >/dev/null; then
    echo "== the GPU image's stand-in for the GPU check's rehearsal is ready (scripts/gpu-rehearsal-env.sh)"
  else
    echo "== the GPU image's stand-in could not be built: the GPU check's rehearsal test will fail" >&2
  fi
fi

if [ "$run" = 1 ]; then
  echo "== running scenarios/quickstart.yaml"
  # netns with real agents where the machine allows (root + namespaces), else sim; it says which and why
  .venv/bin/testbed run scenarios/quickstart.yaml --substrate auto
fi
