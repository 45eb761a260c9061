#!/usr/bin/env bash
# The GPU check: the NVML power path end to end on a machine with an NVIDIA GPU (a few minutes).
#   doctor sees NVML + CUDA torch; `testbed calibrate power` at >= 4 caps with real training on the
#   GPU; a one-site scenario with power.backend: nvml whose trace moves the cap (enforced =
#   requested within 1 W, original limit back at the end); a calibrate run interrupted by SIGINT
#   (original limit back). Writes OUT/gpu-check.json and OUT/gpu-check.md; exit 0 only if all pass.
# Usage: scripts/gpu-check.sh [OUT_DIR]   (env: PYTHON, GPU, CAPS, SECONDS_PER_CAP, FAMILY, SUBSTRATE)
# Needs: root (the scenario's node agent runs in a network namespace), torch with CUDA, nvidia-ml-py.
# Installs nothing: it uses the repository's .venv when present, else $PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results/gpu-check}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
{
  echo "python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count())' || echo "torch: not importable"
  "$PYTHON" -c 'import pynvml; pynvml.nvmlInit(); print("nvml driver", pynvml.nvmlSystemGetDriverVersion())' 2>/dev/null || echo "pynvml: not usable (no NVIDIA driver, or nvidia-ml-py missing)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,power.limit,power.default_limit,power.min_limit,power.max_limit --format=csv || echo "nvidia-smi: none"
} 2>&1 | tee "$OUT/environment.txt"
exec "$PYTHON" -m testbed.power.gpu_check --out "$OUT" --gpu "${GPU:-0}" --caps "${CAPS:-4}" \
  --seconds "${SECONDS_PER_CAP:-8}" --family "${FAMILY:-char-transformer}" --substrate "${SUBSTRATE:-netns}"
