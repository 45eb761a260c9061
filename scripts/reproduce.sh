#!/usr/bin/env bash
# Reproduce the reference results: the one command the Vagrant one-liner runs
# (docs/how-to/vagrant.md); it works the same on any Debian host after scripts/setup.sh.
#   bash scripts/reproduce.sh [--sim-only]
#
# It regenerates results/reference/ (scripts/reference.sh: the paper scenario and the degradation
# sweep on sim and, where the machine allows, in netns emulation, plus the report over them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -x .venv/bin/testbed ] || bash scripts/setup.sh --no-run
exec bash scripts/reference.sh "$@"
