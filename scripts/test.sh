#!/usr/bin/env bash
# One command: set up (if needed) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --no-run
exec .venv/bin/python -m pytest tests "$@"
