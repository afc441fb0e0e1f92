#!/usr/bin/env bash
# Times `muster sim` under each of muster's policies and the reference simulator's under each of
# its four on the same SWF trace (docs/benchmarks.md, "Simulator against a plain reference"): the best of
# RUNS runs each, with the load average beside every figure.
#   hack/ref-sim/bench.sh [SCENARIO.yaml TRACE.swf PROCESSORS]   (default: scenarios/swf-example-procs.yaml)
#   RUNS=3 (default); MUSTER=target/release/muster (default; built when absent)
set -euo pipefail
cd "$(dirname "$0")/../.."
scenario=${1:-scenarios/swf-example-procs.yaml} trace=${2:-scenarios/swf/example.swf} procs=${3:-512}
runs=${RUNS:-3} muster=${MUSTER:-target/release/muster}
[[ -x $muster ]] || cargo build -q --release -p muster
best() {  # best wall time in seconds of RUNS runs of the command
  local b=
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
    b=$(awk -v b="$b" -v t="$(awk -v a="$t0" -v z="$t1" 'BEGIN{print z-a}')" 'BEGIN{print (b == "" || t < b) ? t : b}')
  done
  printf '%.2f' "$b"
}
load() { uptime | sed 's/.*load average: //'; }
echo "$scenario ($(grep -vc '^;' "$trace") jobs), best of $runs, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
for s in muster muster-conservative muster-easy muster-fifo muster-besteffort; do
  echo "muster sim --schedulers $s: $(best "$muster" sim "$scenario" --schedulers "$s") s (load $(load))"
done
for p in fcfs besteffort easy conservative selective; do
  echo "refsim.py $p: $(best python3 hack/ref-sim/refsim.py "$trace" "$p" "$procs") s (load $(load))"
done
