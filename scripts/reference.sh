#!/usr/bin/env bash
# Regenerate results/reference/: the paper scenario (sim, and netns emulation where this machine
# allows it), the validation sweeps over >= 10 seeds on sim (degradation, forecast error x epsilon,
# alpha, renewable availability, class rule vs Eq. 1), the degradation sweep in emulation over 3
# seeds (and the same cells on sim, so that sim and emulation pair up), and one report over all;
# then the PowerTrip study over 10 seeds on sim and 2 on netns, with its own report, and its
# sensitivity sweeps on sim over 5 seeds (gain projection, weight reference, static k, data
# heterogeneity, patience; their tables only).
# The full outputs go to results/reference-work/ (not committed); the report and the small tables
# are copied into results/reference/.
#   bash scripts/reference.sh            # everything (51 min here with emulation)
#   bash scripts/reference.sh --sim-only # the sim parts only (about 7 min here)
#   bash scripts/reference.sh --report-only  # rebuild the report from results/reference-work as it is
#   bash scripts/reference.sh --powertrip-only  # the PowerTrip study and its sensitivity sweeps only; the
#                                               # migration study's report is rebuilt from results/reference-work
# Emulated measurements are flagged `contended` when other work shares the CPU: run it on a quiet machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -x .venv/bin/testbed ] || bash scripts/setup.sh --no-run
TB=.venv/bin/testbed
WORK=results/reference-work
REF=results/reference
sim_only=0
report_only=0
powertrip_only=0
case "${1:-}" in
  "") ;;
  --sim-only) sim_only=1 ;;
  --report-only) report_only=1 ;;
  --powertrip-only) powertrip_only=1 ;;
  *) echo "error: unknown option ${1} (expected --sim-only, --report-only or --powertrip-only)" >&2; exit 2 ;;
esac
MIGRATION_RUNS="paper-sim sweep-degradation-sim sweep-forecast-sim sweep-alpha-sim sweep-renewables-sim
                sweep-class-rule-sim sweep-degradation-1day-sim paper-netns sweep-degradation-1day-netns"
PT_RUNS="powertrip-us100-sim powertrip-gain-sim powertrip-emulated-netns"  # these get the claims report
PT_SENSITIVITY="weight-ref static-k heterogeneity patience"               # tables only: sweeps/powertrip-NAME.yaml
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
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
sweep() {  # sweep FILE NAME [extra args]: run (or finish: finished trials are reused) into $WORK/NAME
  local file=$1 name=$2; shift 2
  stamp "sweep $name"
  $TB sweep "$file" --out "$WORK/$name" "$@"
  dirs+=("$WORK/$name")
}
existing() {  # existing NAME...: the directories of $WORK that are there
  for name in "$@"; do [ -d "$WORK/$name" ] && echo "$WORK/$name"; done; return 0
}
fl_dirs=()
sens_dirs=()
powertrip() {  # the PowerTrip study: 10 seeds on sim (+ 2 on netns), the gain sweep, the sensitivity sweeps
  stamp "sweep powertrip-us100-sim (the PowerTrip study, 10 seeds)"
  $TB sweep sweeps/powertrip-us100-seeds.yaml --out "$WORK/powertrip-us100-sim"
  fl_dirs+=("$WORK/powertrip-us100-sim")
  stamp "sweep powertrip-gain-sim (projected, measured and corrected gain, 5 seeds)"
  $TB sweep sweeps/powertrip-gain.yaml --out "$WORK/powertrip-gain-sim"
  fl_dirs+=("$WORK/powertrip-gain-sim")
  for s in $PT_SENSITIVITY; do
    stamp "sweep powertrip-$s-sim (sensitivity, 5 seeds)"
    $TB sweep "sweeps/powertrip-$s.yaml" --out "$WORK/powertrip-$s-sim"
    sens_dirs+=("$WORK/powertrip-$s-sim")
  done
  if [ "$emulate" = 1 ]; then
    stamp "sweep powertrip-emulated-netns (real model exchanges, 2 seeds)"
    $TB sweep sweeps/powertrip-emulated-seeds.yaml --out "$WORK/powertrip-emulated-netns"
    fl_dirs+=("$WORK/powertrip-emulated-netns")
  fi
}
if [ "$report_only" = 1 ] || [ "$powertrip_only" = 1 ]; then
  mapfile -t dirs < <(existing $MIGRATION_RUNS)
  [ "${#dirs[@]}" -gt 0 ] && [ -f "$WORK/load-calibration.json" ] || { echo "error: $WORK: no migration-study results to report (run without options first)" >&2; exit 2; }
  if [ "$powertrip_only" = 1 ]; then
    powertrip
  else
    mapfile -t fl_dirs < <(existing $PT_RUNS)
    mapfile -t sens_dirs < <(for s in $PT_SENSITIVITY; do existing "powertrip-$s-sim"; done)
  fi
else
stamp "checkpoint load time on this machine (T_load per model family, beside the paper's 10.3 s)"
$TB calibrate load --scenario scenarios/paper-migration-5node-7day.yaml --out "$WORK/load-calibration.json"
stamp "paper scenario, sim"
$TB run scenarios/paper-migration-5node-7day.yaml --substrate sim --out "$WORK/paper-sim" --force --no-progress
dirs+=("$WORK/paper-sim")
sweep sweeps/validate-degradation.yaml sweep-degradation-sim
sweep sweeps/validate-forecast.yaml sweep-forecast-sim
sweep sweeps/validate-alpha.yaml sweep-alpha-sim
sweep sweeps/validate-renewables.yaml sweep-renewables-sim
sweep sweeps/validate-class-rule.yaml sweep-class-rule-sim
sweep sweeps/validate-degradation-emulated.yaml sweep-degradation-1day-sim --substrate sim
if [ "$emulate" = 1 ]; then
  stamp "paper scenario, netns emulation (real transfers over the shaped WAN, real agents)"
  $TB run scenarios/paper-migration-5node-7day.yaml --substrate netns --out "$WORK/paper-netns" --force --no-progress
  dirs+=("$WORK/paper-netns")
  sweep sweeps/validate-degradation-emulated.yaml sweep-degradation-1day-netns
else
  stamp "skipping emulation (needs root and network namespaces; see testbed doctor)"
fi
powertrip
fi
stamp "report"
$TB report "${dirs[@]}" --out "$WORK/report" \
  --title "Reference results: paper scenario and validation sweeps"
if [ "${#fl_dirs[@]}" -gt 0 ]; then
  stamp "PowerTrip report"
  $TB report "${fl_dirs[@]}" --out "$WORK/report-powertrip" --title "Reference results: the PowerTrip study over seeds"
fi
rm -rf "$REF.new" && mkdir -p "$REF.new"
cp -r "$WORK/report" "$REF.new/report"
[ -d "$WORK/report-powertrip" ] && [ "${#fl_dirs[@]}" -gt 0 ] && cp -r "$WORK/report-powertrip" "$REF.new/report-powertrip"
dirs+=("${fl_dirs[@]}" "${sens_dirs[@]}")
rm -f "$REF.new/report/migrations.parquet"  # large; every number it holds is in report.md's tables
cp "$WORK/load-calibration.json" "$REF.new/"
for d in "${dirs[@]}"; do
  name=$(basename "$d")
  mkdir -p "$REF.new/$name"
  for f in comparison.md comparison.json manifest.json table.md table.csv results.csv sweep.json; do
    [ -f "$d/$f" ] && cp "$d/$f" "$REF.new/$name/"
  done
  for s in "$d"/*/summary.json; do
    [ -f "$s" ] || continue
    p=$(basename "$(dirname "$s")"); mkdir -p "$REF.new/$name/$p"; cp "$s" "$REF.new/$name/$p/"
  done
done
rm -rf "$REF" && mv "$REF.new" "$REF"
stamp "reference results: $REF/report/report.md"
