#!/usr/bin/env bash
# The GPU machine's image, rebuilt here for the GPU check's rehearsal (tests/integration/
# test_gpu_check_rehearsal.py): a Python 3.12 virtual environment holding only what the offline GPU
# machine has (docs/how-to/gpu.md): CUDA PyTorch (the package index's build: no GPU here, so it runs
# on the CPU), nvidia-ml-py, numpy, pandas, pyarrow, psutil, PyYAML, scikit-learn, matplotlib, tqdm,
# pytest. Nothing of testbed's own dependencies: the check must bring those itself (scripts/gpu-bundle.sh).
#   bash scripts/gpu-rehearsal-env.sh        # builds it once (~4 GB, a few minutes), then prints its python
# Env: GPU_REHEARSAL_ENV (where; default ~/.cache/testbed/gpu-rehearsal-py312), PYTHON312 (the interpreter).
set -euo pipefail
ENV_DIR=${GPU_REHEARSAL_ENV:-$HOME/.cache/testbed/gpu-rehearsal-py312}
IMAGE_PKGS="torch nvidia-ml-py numpy pandas pyarrow psutil PyYAML scikit-learn matplotlib tqdm pytest"
if [[ -z "${PYTHON312:-}" ]]; then  # the first that runs (a pyenv shim may be there and refuse)
  for c in /root/.pyenv/versions/3.12*/bin/python3.12 "$(command -v python3.12 || true)"; do
    if [[ -x "$c" ]] && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then PYTHON312=$c; break; fi
  done
fi
[[ -n "${PYTHON312:-}" ]] || { echo "error: no python3.12 here (set PYTHON312)" >&2; exit 1; }
stamp="$ENV_DIR/.image-packages"
if [[ -x "$ENV_DIR/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$IMAGE_PKGS" ]]; then
  echo "$ENV_DIR/bin/python"; exit 0
fi
echo "== building the GPU image's stand-in ($ENV_DIR): Python 3.12 with $IMAGE_PKGS" >&2
rm -rf "$ENV_DIR"
mkdir -p "$(dirname "$ENV_DIR")"
"$PYTHON312" -m venv "$ENV_DIR"
# torch from the package index is the CUDA build (its nvidia-* libraries come with it): as on the GPU machine
"$ENV_DIR/bin/python" -m pip install -q --disable-pip-version-check $IMAGE_PKGS 2>&1 | grep -v "^WARNING: Location" >&2 || true
"$ENV_DIR/bin/python" -c "import torch, pynvml, numpy, pandas, pyarrow, psutil, yaml, sklearn, matplotlib, tqdm, pytest" \
  || { echo "error: the stand-in of the GPU image did not build ($ENV_DIR)" >&2; exit 1; }
if "$ENV_DIR/bin/python" -c "import pydantic" 2>/dev/null; then
  echo "error: pydantic came with the image's packages: the stand-in would hide a missing bundle entry" >&2; exit 1
fi
echo "$IMAGE_PKGS" > "$stamp"
echo "$ENV_DIR/bin/python"
