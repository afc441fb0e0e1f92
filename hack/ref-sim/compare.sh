#!/usr/bin/env bash
# muster's schedules under each of its policies against the reference simulator's, job for job:
# FCFS (muster-fifo), best-effort FIFO (muster-besteffort), EASY (muster-easy), conservative
# (muster-conservative, depth 16) and selective (muster, depth 16, slowdown 3), on SWF scenarios
# mapped one pod per processor onto one node (docs/simulator.md, "Checked against a reference
# simulator"). Fails on the first job whose start differs.
#   hack/ref-sim/compare.sh [SCENARIO.yaml TRACE.swf PROCESSORS]...
# With no arguments: the synthetic traces and the real Gaia trace (fetched by hack/traces/fetch.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
if (( $# == 0 )); then
  hack/traces/fetch.sh gaia
  set -- scenarios/swf-example-procs.yaml scenarios/swf/example.swf 512 \
         crates/muster-sim/tests/fixtures/long-queue/scenario.yaml crates/muster-sim/tests/fixtures/long-queue/trace.swf 128 \
         scenarios/swf/gaia-procs.yaml scenarios/swf/archive/UniLu-Gaia-2014-2.swf 2004
fi
cargo build -q --release -p muster-sim --example schedule
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
while (( $# >= 3 )); do
  scenario=$1 trace=$2 procs=$3; shift 3
  for pair in fcfs:muster-fifo besteffort:muster-besteffort easy:muster-easy conservative:muster-conservative selective:muster; do
    ref=${pair%%:*} ours=${pair#*:}
    python3 hack/ref-sim/refsim.py "$trace" "$ref" "$procs" >"$out/ref"
    target/release/examples/schedule "$scenario" "$ours" >"$out/ours"
    if ! diff -q "$out/ref" "$out/ours" >/dev/null; then
      echo "FAIL $scenario: $ours differs from the reference's $ref (job, reference start, muster's start):"
      paste -d' ' "$out/ref" "$out/ours" | awk '$1 != $3 || $2 != $4 {print $1, $2, $4}' | head -5
      exit 1
    fi
    echo "ok   $scenario: $ours = reference $ref, $(wc -l <"$out/ref") jobs, same start each"
  done
done
