#!/usr/bin/env bash
# make sim-vs-real: the same scenario on the simulator's default kube-scheduler model and on the
# real control plane of hack/ (default kube-scheduler, real Job controller, KWOK nodes); prints
# both side by side and fails when they differ by more than TOLERANCE on completed jobs or makespan.
#
#   hack/sim-vs-real.sh [SCENARIO...]
#       (default: scenarios/sim-vs-real.yaml scenarios/sim-vs-real-clog.yaml)
#   SEED=1 TOLERANCE=0.10 TIMEOUT=900 OUT=dir hack/sim-vs-real.sh ...
#   MUSTER_SIM_BIN=path hack/sim-vs-real.sh ...   (a built muster for the sim side instead of
#                                            cargo build --release -p muster)
#   SCHEDULER_V=3 hack/sim-vs-real.sh ...   (restart kube-scheduler at that log level; its log is
#                                            kept in $OUT/NAME.logs; costs it some cpu)
#
# Per scenario: start a private cluster in $MUSTER_SVR_DIR (default ~/.cache/muster/sim-vs-real-cluster)
# with the nodes of the scenario's own cluster description, measure the control plane's rates on a
# burst of CAL_JOBS (16) x 10 pods that fits (pod creations/s, bindings/s, bound -> all-ready; the
# figures the scenario's timing block models), create the scenario's jobs
# (`muster-harness jobs` draws them with muster-sim's own generator for SEED: count, pods, requests,
# run time, deadline, submit time) as batch/v1 Jobs at their submit times, wait until every Job is
# Complete or Failed (or TIMEOUT seconds), read completed / failed / makespan (first Job created ->
# last Job finished) off the Job objects, stop the cluster (by pid), run
# `muster sim SCENARIO --schedulers default --seed SEED`, and compare.
# kube-scheduler's metrics are scraped once a second during the run (its secure port, admin
# certificate) and summarised by `muster-harness metrics`.
# Outputs (jobs, real and sim JSON, the comparison) stay in $OUT (default: a temporary directory,
# printed at the end).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export MUSTER_CLUSTER_DIR=${MUSTER_SVR_DIR:-$MUSTER_CACHE/sim-vs-real-cluster}
export KUBECONFIG=$MUSTER_CLUSTER_DIR/kubeconfig
SEED=${SEED:-1} TOLERANCE=${TOLERANCE:-0.10} TIMEOUT=${TIMEOUT:-900}
OUT=${OUT:-$(mktemp -d -t sim-vs-real.XXXXXX)}
mkdir -p "$OUT"
scenarios=("$@")
(( ${#scenarios[@]} )) || scenarios=("$repo_dir/scenarios/sim-vs-real.yaml" "$repo_dir/scenarios/sim-vs-real-clog.yaml")
k() { "$K8S_BIN/kubectl" "$@"; }

"$hack_dir/cluster-build.sh"
resolve_muster_bin
resolve_harness_bin release
harness=$MUSTER_HARNESS_BIN
if [[ -n ${MUSTER_SIM_BIN:-} ]]; then
  sim_bin=$MUSTER_SIM_BIN
else
  log "building muster (release) for muster sim"
  (cd "$repo_dir" && cargo build --release -q -p muster) || die "cargo build --release -p muster failed"
  sim_bin=$(cd "$repo_dir" && cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/muster
fi

# restart_scheduler V: the kube-scheduler cluster-up.sh started, again with --v=V.
restart_scheduler() {
  restart_component kube-scheduler 0 --v="$1"
  . "$MUSTER_CLUSTER_DIR/ports.env"
  until curl -fsSk "https://127.0.0.1:$MUSTER_PORT_SCHEDULER/healthz" >/dev/null 2>&1; do sleep 0.2; done
}

cluster_running=""
trap '[[ -n $cluster_running ]] && "$hack_dir/cluster-down.sh"' EXIT
trap 'exit 130' INT TERM

status=0
for scenario in "${scenarios[@]}"; do
  scenario=$(realpath "$scenario")
  name=$(basename "$scenario" .yaml)
  cluster_file=$(python3 -c 'import sys, yaml, os; p = sys.argv[1]; print(os.path.join(os.path.dirname(p), yaml.safe_load(open(p))["cluster"]))' "$scenario")
  "$harness" jobs "$scenario" "$SEED" "$OUT/$name.jobs.json"

  log "$name: starting a private cluster with the nodes of $cluster_file"
  "$hack_dir/cluster-down.sh" >/dev/null 2>&1 || true
  cluster_running=1
  "$hack_dir/cluster-up.sh" "$cluster_file" >/dev/null
  if [[ -n ${SCHEDULER_V:-} ]]; then restart_scheduler "$SCHEDULER_V"; fi
  # shellcheck source=/dev/null
  . "$MUSTER_CLUSTER_DIR/ports.env"
  export SCHEDULER_METRICS_URL=https://127.0.0.1:$MUSTER_PORT_SCHEDULER/metrics
  for ns in calibrate sim-vs-real; do
    k create namespace $ns >/dev/null
    until k -n $ns get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
  done
  # The control plane's own rates (what the scenario's timing block models), on a burst of
  # CAL_JOBS x 10 pods that fits the cluster; its pods are Succeeded before the scenario starts.
  "$harness" calibrate "$KUBECONFIG" calibrate "${CAL_JOBS:-16}" 10 "$OUT/$name.calibration.json"
  log "$name: running the jobs on the real control plane (seed $SEED)"
  started=$(date -u +%FT%TZ)
  "$harness" run "$OUT/$name.jobs.json" "$KUBECONFIG" sim-vs-real "$OUT/$name.real.json" "$TIMEOUT"
  cp -r "$MUSTER_CLUSTER_DIR/logs" "$OUT/$name.logs" 2>/dev/null || true
  "$hack_dir/cluster-down.sh" >/dev/null
  cluster_running=""

  log "$name: muster sim --schedulers default --seed $SEED"
  "$sim_bin" sim "$scenario" --schedulers default --seed "$SEED" --json "$OUT/$name.sim.json" \
    > "$OUT/$name.sim.txt" 2>/dev/null
  {
    echo "== $name (seed $SEED, real run started $started, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$harness" compare "$OUT/$name.real.json" "$OUT/$name.sim.json" "$OUT/$name.jobs.json" "$TOLERANCE"
    echo "calibration burst (${CAL_JOBS:-16} x 10 pods): $(python3 -c 'import json, sys; print(", ".join(f"{k} {v}" for k, v in json.load(open(sys.argv[1])).items()))' "$OUT/$name.calibration.json")"
  } | tee "$OUT/$name.compare.txt" || true
  "$harness" metrics "$OUT/$name.real.json" > "$OUT/$name.metrics.txt" || true
  grep -q ': yes$' "$OUT/$name.compare.txt" || status=1
done
echo "outputs in $OUT" >&2
exit "$status"
