#!/usr/bin/env bash
# One command: set up (if needed) and run the whole test suite. Extra arguments go to pytest.
# Tests run on WORKERS processes (pytest-xdist; default: the cores, 2 to 4): the integration tests
# one after another on one of them (root, namespaces, timed transfers), the unit tests spread over all.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --no-run
workers=${TESTBED_TEST_WORKERS:-$(( $(nproc) < 2 ? 2 : ( $(nproc) > 4 ? 4 : $(nproc) ) ))}
exec .venv/bin/python -m pytest tests -n "$workers" --durations=30 "$@"
