#!/usr/bin/env bash
# Regenerate results/reference/ from a clean tree at one commit (refused otherwise: commit first):
# - the migration study: the paper's setup at each degradation level over 10 seeds on sim; the
#   validation sweeps over 10 seeds on sim (degradation, forecast error x epsilon, alpha on two
#   scenarios, renewable availability, class rule vs Eq. 1, cross-traffic load x the predictor's
#   bandwidth basis); the paper's 5-site setup in emulation (netns, 10 seeds with ballast nodes at two
#   bandwidth levels, 3 seeds with node agents) and the same ballast sweep on sim, so that sim and
#   emulation pair up per seed; the cross-traffic sweep in emulation (netns, 3 seeds, three sites)
#   and its sim twin; one report over all;
# - the PowerTrip study over 10 seeds on sim (us-100 on digits and on shapes, every policy under both
#   clocks), its gain sweep and sensitivity sweeps on sim over 10 seeds (weight reference, data
#   heterogeneity, patience, compute speed, scarce power; each beside static baselines), and 15 seeds
#   on netns, all judged in its own report. PT_SENSITIVITY="NAME ..." (default: all of them) picks
#   the sensitivity sweeps, PT_SENSITIVITY="" none.
# Every run records the commit and the hash of every input in its manifest. The full outputs go to
# results/reference-work/ (not committed); results/reference/ keeps each report with the raw data it
# was derived from (REPORT/data: per-run summaries, per-migration and per-job tables), the sweeps'
# tables and every run's manifest and summaries, and timings.csv (wall seconds per step). The last
# step is `testbed report --check results/reference`, which CI runs too.
#   bash scripts/reference.sh                 # everything (emulation needs root and netns)
#   bash scripts/reference.sh --sim-only      # the sim parts only (combines with --migration-only / --powertrip-only)
#   bash scripts/reference.sh --report-only   # rebuild the reports from results/reference-work as it is
#   bash scripts/reference.sh --powertrip-only  # the PowerTrip study and its sensitivity sweeps only; the
#                                               # migration study's report is rebuilt from results/reference-work
#   bash scripts/reference.sh --migration-only  # the migration study only; the PowerTrip report is rebuilt
#                                               # from the PowerTrip runs in results/reference-work, or
#                                               # kept as committed when there are none
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
migration_only=0
for opt in "$@"; do  # --migration-only and --powertrip-only combine with --sim-only
  case "$opt" in
    --sim-only) sim_only=1 ;;
    --report-only) report_only=1 ;;
    --powertrip-only) powertrip_only=1 ;;
    --migration-only) migration_only=1 ;;
    *) echo "error: unknown option ${opt} (expected --sim-only, --report-only, --powertrip-only or --migration-only)" >&2; exit 2 ;;
  esac
done
if [ "$((report_only + powertrip_only + migration_only))" -gt 1 ]; then
  echo "error: --report-only, --powertrip-only and --migration-only exclude each other" >&2; exit 2
fi
MIGRATION_RUNS="paper-degradation-sim sweep-degradation-sim sweep-forecast-sim sweep-alpha-sim sweep-alpha-holdout-sim
                sweep-renewables-sim sweep-class-rule-sim sweep-cross-traffic-sim paper-emulated-sim
                paper-emulated-netns paper-emulated-agents-netns cross-traffic-emulated-sim cross-traffic-emulated-netns"
PT_RUNS="powertrip-us100-sim powertrip-shapes-sim powertrip-gain-sim powertrip-emulated-netns"
PT_SENSITIVITY=${PT_SENSITIVITY-"weight-ref heterogeneity patience compute scarce"}  # sweeps/powertrip-NAME.yaml
emulate=0
netns_ok() {
  $TB doctor --json 2>/dev/null | .venv/bin/python -c \
    'import json, sys; sys.exit(0 if json.load(sys.stdin)["summary"]["substrates"]["netns"]["usable"] else 1)'
}
if [ "$sim_only" = 0 ] && [ "$(id -u)" = 0 ] && netns_ok; then
  emulate=1
elif [ "$sim_only" = 0 ] && [ "$report_only" = 0 ]; then
  # results/reference/ is replaced as a whole: without emulation it would lose the committed emulated runs
  echo "error: the emulated runs need root and usable network namespaces (testbed doctor says why not);" \
       "run this as root (sudo bash scripts/reference.sh), or pass --sim-only to regenerate without them" \
       "(results/reference/ then holds no emulated runs)" >&2
  exit 2
fi
if [ "$report_only" = 0 ] && [ -n "$(git status --porcelain --untracked-files=no -- . ':(exclude)results')" ]; then
  echo "error: the tree has uncommitted changes: reference results are made from a clean tree at one commit (commit first)" >&2
  exit 2
fi
if [ "$report_only" = 0 ] && [ "$powertrip_only" = 0 ] && [ "$migration_only" = 0 ]; then
  rm -rf "$WORK"  # every result at this commit: nothing reused from an earlier one
elif [ "$migration_only" = 1 ]; then
  for name in $MIGRATION_RUNS; do rm -rf "${WORK:?}/$name"; done  # the migration study again, at this commit
fi
mkdir -p "$WORK"
[ -f "$WORK/timings.csv" ] || echo "step,wall_s,commit" > "$WORK/timings.csv"
COMMIT=$(git rev-parse HEAD)
dirs=()
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
timed() {  # timed NAME COMMAND...: run it and append its wall seconds to timings.csv
  local name=$1 t0; shift
  t0=$(date +%s)
  "$@"
  echo "$name,$(( $(date +%s) - t0 )),$COMMIT" >> "$WORK/timings.csv"
}
declare -A ran_here=()  # the sweeps already run by this invocation (the live ones, run first)
run_sweep() {  # run_sweep FILE NAME [extra args]: run into $WORK/NAME, unless this invocation already did
  local file=$1 name=$2; shift 2
  [ -n "${ran_here[$name]:-}" ] && return 0
  stamp "sweep $name"
  timed "$name" $TB sweep "$file" --out "$WORK/$name" "$@"
  ran_here[$name]=1
}
sweep() {  # sweep FILE NAME [extra args]: run into $WORK/NAME and report it
  run_sweep "$@"
  dirs+=("$WORK/$2")
}
existing() {  # existing NAME...: the directories of $WORK that are there
  for name in "$@"; do [ -d "$WORK/$name" ] && echo "$WORK/$name"; done; return 0
}
fl_dirs=()
pt_existing() {  # the PowerTrip runs of $WORK that are there
  existing $PT_RUNS
  for s in $PT_SENSITIVITY; do existing "powertrip-$s-sim"; done
}
powertrip() {  # the PowerTrip study: 10 seeds on sim (+ 15 on netns), the gain sweep, the sensitivity sweeps
  for name in $PT_RUNS powertrip-weight-ref-sim powertrip-heterogeneity-sim powertrip-patience-sim \
              powertrip-compute-sim powertrip-scarce-sim powertrip-static-k-sim; do
    [ -n "${ran_here[$name]:-}" ] || rm -rf "${WORK:?}/$name"  # every PowerTrip result at this commit
  done
  stamp "sweep powertrip-us100-sim (the PowerTrip study, 10 seeds, both clocks)"
  timed powertrip-us100-sim $TB sweep sweeps/powertrip-us100-seeds.yaml --out "$WORK/powertrip-us100-sim"
  fl_dirs+=("$WORK/powertrip-us100-sim")
  stamp "sweep powertrip-shapes-sim (the same on the harder shapes set, 10 seeds)"
  timed powertrip-shapes-sim $TB sweep sweeps/powertrip-shapes-seeds.yaml --out "$WORK/powertrip-shapes-sim"
  fl_dirs+=("$WORK/powertrip-shapes-sim")
  stamp "sweep powertrip-gain-sim (projected, measured and corrected gain, 10 seeds)"
  timed powertrip-gain-sim $TB sweep sweeps/powertrip-gain.yaml --out "$WORK/powertrip-gain-sim"
  fl_dirs+=("$WORK/powertrip-gain-sim")
  for s in $PT_SENSITIVITY; do
    stamp "sweep powertrip-$s-sim (sensitivity, 10 seeds)"
    timed "powertrip-$s-sim" $TB sweep "sweeps/powertrip-$s.yaml" --out "$WORK/powertrip-$s-sim"
    fl_dirs+=("$WORK/powertrip-$s-sim")
  done
  if [ "$emulate" = 1 ]; then
    stamp "the 12-site PowerTrip study on netns (real model exchanges, 15 seeds)"
    run_sweep sweeps/powertrip-emulated-seeds.yaml powertrip-emulated-netns
    fl_dirs+=("$WORK/powertrip-emulated-netns")
  fi
}
if [ "$report_only" = 1 ] || [ "$powertrip_only" = 1 ]; then
  mapfile -t dirs < <(existing $MIGRATION_RUNS)
  [ "${#dirs[@]}" -gt 0 ] && [ -f "$WORK/load-calibration.json" ] || { echo "error: $WORK: no migration-study results to report (run without options first)" >&2; exit 2; }
  if [ "$powertrip_only" = 1 ]; then
    powertrip
  else
    mapfile -t fl_dirs < <(pt_existing)
  fi
else
stamp "checkpoint load time on this machine (T_load per model family, beside the paper's 10.3 s)"
timed calibrate-load $TB calibrate load --scenario scenarios/paper-migration-5node-7day.yaml --out "$WORK/load-calibration.json"
if [ "$emulate" = 1 ]; then
  # the live sweeps first, while nothing else of this script shares the CPU (their measurements are
  # flagged `contended` otherwise); each is reported where its study lists it below
  stamp "the live sweeps first: the paper's setup, cross-traffic and the 12-site PowerTrip study on netns"
  run_sweep sweeps/paper-emulated.yaml paper-emulated-netns
  run_sweep sweeps/paper-emulated-agents.yaml paper-emulated-agents-netns
  run_sweep sweeps/validate-cross-traffic-emulated.yaml cross-traffic-emulated-netns
  [ "$migration_only" = 1 ] || { rm -rf "${WORK:?}/powertrip-emulated-netns"
    run_sweep sweeps/powertrip-emulated-seeds.yaml powertrip-emulated-netns; }
fi
sweep sweeps/paper-degradation.yaml paper-degradation-sim
sweep sweeps/validate-degradation.yaml sweep-degradation-sim
sweep sweeps/validate-forecast.yaml sweep-forecast-sim
sweep sweeps/validate-alpha.yaml sweep-alpha-sim
sweep sweeps/validate-alpha-holdout.yaml sweep-alpha-holdout-sim
sweep sweeps/validate-renewables.yaml sweep-renewables-sim
sweep sweeps/validate-class-rule.yaml sweep-class-rule-sim
sweep sweeps/validate-cross-traffic.yaml sweep-cross-traffic-sim
sweep sweeps/paper-emulated.yaml paper-emulated-sim --substrate sim
sweep sweeps/validate-cross-traffic-emulated.yaml cross-traffic-emulated-sim --substrate sim
if [ "$emulate" = 1 ]; then
  stamp "the paper's setup in emulation (real transfers over the shaped WAN, measured checkpoint I/O)"
  sweep sweeps/paper-emulated.yaml paper-emulated-netns
  sweep sweeps/paper-emulated-agents.yaml paper-emulated-agents-netns
  stamp "cross-traffic in emulation (real competing flows beside every transfer, 3 seeds)"
  sweep sweeps/validate-cross-traffic-emulated.yaml cross-traffic-emulated-netns
else
  stamp "skipping emulation (needs root and network namespaces; see testbed doctor)"
fi
if [ "$migration_only" = 1 ]; then
  mapfile -t fl_dirs < <(pt_existing)
else
powertrip
fi
fi
stamp "report"
timed report $TB report "${dirs[@]}" --out "$WORK/report" \
  --title "Reference results: the migration study (paper setup and validation sweeps)"
if [ "${#fl_dirs[@]}" -gt 0 ]; then
  stamp "PowerTrip report"
  timed report-powertrip $TB report "${fl_dirs[@]}" --out "$WORK/report-powertrip" --title "Reference results: the PowerTrip study over seeds"
fi
rm -rf "$REF.new" && mkdir -p "$REF.new"
cp -r "$WORK/report" "$REF.new/report"
[ -d "$WORK/report-powertrip" ] && [ "${#fl_dirs[@]}" -gt 0 ] && cp -r "$WORK/report-powertrip" "$REF.new/report-powertrip"
dirs+=("${fl_dirs[@]}")
rm -f "$REF.new/report/migrations.parquet"  # derived: re-derived from report/data/migrations.parquet (raw)
cp "$WORK/load-calibration.json" "$WORK/timings.csv" "$REF.new/"
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
if [ "$migration_only" = 1 ] && [ "${#fl_dirs[@]}" = 0 ] && [ -d "$REF/report-powertrip" ]; then
  # no PowerTrip runs here (a fresh checkout): the committed PowerTrip part stays as it was; its
  # report records the commit of its own runs, and `report --check` re-derives it from its data
  stamp "keeping the committed PowerTrip report (no PowerTrip runs in $WORK)"
  cp -r "$REF/report-powertrip" "$REF.new/"
  for d in "$REF"/powertrip-*; do [ -d "$d" ] && cp -r "$d" "$REF.new/"; done
fi
rm -rf "$REF" && mv "$REF.new" "$REF"
stamp "check: every table and verdict re-derived from the stored data"
$TB report --check "$REF"
stamp "reference results: $REF/report/report.md (commit $COMMIT)"
