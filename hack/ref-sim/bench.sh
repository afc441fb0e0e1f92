#!/usr/bin/env bash
# Times each of muster's policies against the reference simulator running the same policy, on
# one SWF trace (docs/benchmarks.md, "Every policy against the reference's own"): muster's starts
# as `cargo run --release -p muster-sim --example schedule` prints them (the schedule only, as the
# reference computes it), then `hack/ref-sim/refsim.py`, in turn, PAIRS times. Prints per policy
# the median time of each and the median of the pairs' ratios with its range, and the load.
#   hack/ref-sim/bench.sh [SCENARIO.yaml TRACE.swf PROCESSORS]
#   default: the long queue, 4,606 synthetic jobs on 128 processors (`gen_swf 7 4606 128 150`,
#   mapped as the long-queue test fixture maps its 300); PAIRS=7
#   e.g. hack/ref-sim/bench.sh scenarios/swf/gaia-procs.yaml scenarios/swf/archive/UniLu-Gaia-2014-2.swf 2004
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs=${PAIRS:-7}
cargo build -q --release -p muster-sim --example schedule --example gen_swf
schedule=target/release/examples/schedule
if (( $# == 0 )); then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  cp crates/muster-sim/tests/fixtures/long-queue/{scenario,cluster}.yaml "$dir"
  target/release/examples/gen_swf 7 4606 128 150 >"$dir/trace.swf"
  set -- "$dir/scenario.yaml" "$dir/trace.swf" 128
fi
scenario=$1 trace=$2 procs=$3
seconds() {  # wall seconds of one run of the command, its output thrown away
  local t0 t1
  t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
  awk -v a="$t0" -v z="$t1" 'BEGIN { printf "%.4f\n", z - a }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "$scenario ($(grep -vc '^;' "$trace") jobs), $pairs pairs, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
printf '%-20s %-13s %9s %9s %7s %15s  %s\n' policy reference muster reference ratio "ratio range" load
for pair in muster-fifo:fcfs muster-besteffort:besteffort muster-easy:easy muster-conservative:conservative muster:selective; do
  ours=${pair%%:*} ref=${pair#*:}
  a=() b=() r=()
  for _ in $(seq "$pairs"); do
    ta=$(seconds "$schedule" "$scenario" "$ours")
    tb=$(seconds python3 hack/ref-sim/refsim.py "$trace" "$ref" "$procs")
    a+=("$ta") b+=("$tb") r+=("$(awk -v x="$ta" -v y="$tb" 'BEGIN { printf "%.4f\n", x / y }')")
  done
  range=$(printf '%s\n' "${r[@]}" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f-%.2f", lo, hi }')
  printf '%-20s %-13s %8.3fs %8.3fs %6.2fx %15s  %s\n' "$ours" "$ref" \
    "$(printf '%s\n' "${a[@]}" | median)" "$(printf '%s\n' "${b[@]}" | median)" \
    "$(printf '%s\n' "${r[@]}" | median)" "$range" "$(load)"
done
