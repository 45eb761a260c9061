#!/usr/bin/env bash
# Regenerate results/reference/: one full run of the paper scenario (sim, and netns emulation
# where this machine allows it), the degradation sweep (sim, 3 seeds; and emulated, 1 seed),
# and the validation report over all of them. The full outputs go to results/reference-work/
# (not committed); the report and the small tables are copied into results/reference/.
#   bash scripts/reference.sh            # everything (about 45 min here with emulation)
#   bash scripts/reference.sh --sim-only # the sim parts only (about 2 min)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -x .venv/bin/testbed ] || bash scripts/setup.sh --no-run
TB=.venv/bin/testbed
WORK=results/reference-work
REF=results/reference
sim_only=0
[ "${1:-}" = "--sim-only" ] && sim_only=1
emulate=0
netns_ok() {
  $TB doctor --json 2>/dev/null | .venv/bin/python -c \
    'import json, sys; sys.exit(0 if json.load(sys.stdin)["summary"]["substrates"]["netns"]["usable"] else 1)'
}
if [ "$sim_only" = 0 ] && [ "$(id -u)" = 0 ] && netns_ok; then
  emulate=1
fi
mkdir -p "$WORK"
dirs=()
echo "== paper scenario, sim"
$TB run scenarios/paper-migration-5node-7day.yaml --substrate sim --out "$WORK/paper-sim" --force --no-progress
dirs+=("$WORK/paper-sim")
echo "== degradation sweep, sim (3 seeds)"
$TB sweep sweeps/validate-degradation.yaml --out "$WORK/sweep-degradation-sim"
dirs+=("$WORK/sweep-degradation-sim")
if [ "$emulate" = 1 ]; then
  echo "== paper scenario, netns emulation (real transfers over the shaped WAN, real agents)"
  $TB run scenarios/paper-migration-5node-7day.yaml --substrate netns --out "$WORK/paper-netns" --force --no-progress
  dirs+=("$WORK/paper-netns")
  echo "== degradation sweep, netns emulation (1 seed)"
  $TB sweep sweeps/validate-degradation-emulated.yaml --out "$WORK/sweep-degradation-netns"
  dirs+=("$WORK/sweep-degradation-netns")
else
  echo "== skipping emulation (needs root and network namespaces; see testbed doctor)"
fi
echo "== report"
$TB report "${dirs[@]}" --out "$WORK/report" --title "Reference results: paper scenario and degradation sweep"
rm -rf "$REF.new" && mkdir -p "$REF.new"
cp -r "$WORK/report" "$REF.new/report"
for d in "${dirs[@]}"; do
  name=$(basename "$d")
  mkdir -p "$REF.new/$name"
  for f in comparison.md comparison.json manifest.json table.md table.csv results.csv; do
    [ -f "$d/$f" ] && cp "$d/$f" "$REF.new/$name/"
  done
  for s in "$d"/*/summary.json; do
    [ -f "$s" ] || continue
    p=$(basename "$(dirname "$s")"); mkdir -p "$REF.new/$name/$p"; cp "$s" "$REF.new/$name/$p/"
  done
done
rm -rf "$REF" && mv "$REF.new" "$REF"
echo "reference results: $REF/report/report.md"
