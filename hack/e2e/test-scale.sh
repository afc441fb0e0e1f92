#!/usr/bin/env bash
# e2e / experiment: seed 002's scalability test on the real control plane, for a given scheduler.
#
#   hack/e2e/test-scale.sh [--scheduler default|muster] [--queue Q] [--jobs N] [--pods-per-job P]
#                          [--submitters S] [--run-seconds R] [--jitter-seconds J]
#                          [--deadline-seconds D] [--timeout T] [--out FILE] [--namespace NS]
#
# Needs KUBECONFIG pointing at a cluster with the nodes of scenarios/clusters/seed-scalability.yaml
# (100 workers of 100 cpu / 100Gi labelled muster.dev/pool=worker), e.g. `make cluster-up
# CLUSTER=scenarios/clusters/seed-scalability.yaml` or `hack/e2e/run.sh scale`.
#
# N Jobs (default 200) of P pods (default 10) of 2 cpu / 2Gi, backoffLimit 0, created by S parallel
# submitters (default 5). Each pod runs R s plus 0..J s once *all* pods of its Job are ready
# (kwok.muster.dev/run-after: all-ready), and each Job has activeDeadlineSeconds D. The seed runs
# 3 min + 50% jitter with a 15 min deadline; the defaults keep those proportions scaled 1/10
# (R 18, J 9, D 90). Shorter times measure the harness more than the scheduler: on a busy 2-core
# machine KWOK finishes pods many seconds late (runLagSeconds in the output shows by how much).
# The full seed: --jobs 1000 (2x what the cluster holds at once).
#
# With --scheduler muster the Jobs carry muster.dev/queue=Q (default "default"), so muster's
# webhook and controller (which must be running) hold, queue and place them; with default they go
# straight to kube-scheduler. Prints one JSON line (also appended to --out): completed and failed
# Jobs (failedDeadlineExceeded), makespanSeconds, jobsPerMinute, podsBoundPerSecond, the peak use
# of every node against its allocatable (overcommittedNodes must be 0), goodput (the share of bound
# pod-seconds that went to Jobs that completed). Fails if a node was over-committed or the run did
# not finish within the timeout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-scale
args=()
scheduler=default queue=default
while (( $# )); do
  case $1 in
    --namespace) ns=$2; shift 2 ;;
    --scheduler) scheduler=$2; args+=(--scheduler "$2"); shift 2 ;;
    --queue) queue=$2; args+=(--queue "$2"); shift 2 ;;
    --jobs|--pods-per-job|--submitters|--run-seconds|--jitter-seconds|--deadline-seconds|--timeout|--out|--run-after)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[[ $scheduler == default || $scheduler == muster ]] || die "--scheduler must be default or muster"
echo "test-scale ($scheduler)" >&2
[[ -n ${KUBECONFIG:-} ]] || die "KUBECONFIG is not set"
resolve_harness_bin

workers=$(k get nodes -l muster.dev/pool=worker --no-headers 2>/dev/null | wc -l)
(( workers > 0 )) || die "no nodes labelled muster.dev/pool=worker: start the cluster with scenarios/clusters/seed-scalability.yaml"
if [[ $scheduler == muster ]]; then
  k get queues.muster.dev "$queue" >/dev/null 2>&1 ||
    die "--scheduler muster needs muster running and a Queue named $queue (kubectl get queues.muster.dev)"
fi

fresh_namespace "$ns"
set +e
"$MUSTER_HARNESS_BIN" scale --kubeconfig "$KUBECONFIG" --namespace "$ns" "${args[@]}" > "${TMPDIR:-/tmp}/muster-scale.$$"
rc=$?
set -e
line=$(cat "${TMPDIR:-/tmp}/muster-scale.$$"); rm -f "${TMPDIR:-/tmp}/muster-scale.$$"
echo "$line"
[[ -n $line ]] || fail "the experiment produced no figures"
python3 - "$line" <<'EOF' >&2
import json, sys
r = json.loads(sys.argv[1])
print(f"  ..   {r['completed']} of {r['jobs']} jobs completed, {r['failed']} failed "
      f"({r['failedDeadlineExceeded']} deadline exceeded), {r['unfinished']} unfinished")
print(f"  ..   makespan {r['makespanSeconds']} s (lower bound {r['makespanLowerBoundSeconds']} s), "
      f"{r['jobsPerMinute']} jobs/min, goodput {r['goodput']}")
print(f"  ..   {r['podsBound']} pods bound, {r.get('podsBoundPerSecond')} /s overall, "
      f"best 10 s {r.get('podsBoundPerSecondBest10s')} /s; peak {r['peakPodsRunning']} pods running "
      f"(cluster holds {r['clusterPodCapacity']}); busiest node {r['peakPodsOnANode']} pods of "
      f"{r['podsPerNodeCapacity']}, cpu {r['peakCpuFractionOnANode']}")
lag = lambda k: (r.get(k) or {}).get("p50")
print(f"  ..   harness: bound->Running p50 {lag('boundToRunningSeconds')} s, finished late by p50 "
      f"{lag('runLagSeconds')} s (0..{r['jitterSeconds'] + 1} is on time); load average {r['loadAverage']}")
EOF
ok() { python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if $1 else 1)" "$line"; }
check "no node was ever over-committed" ok "r['overcommittedNodes'] == 0"
check "every job completed or failed within the timeout" ok "not r['timedOut'] and r['unfinished'] == 0"
check "every pod of every submitted job was created" ok "r['podsCreated'] >= r['submitted'] * r['podsPerJob'] or r['failed'] > 0"
(( rc == 0 )) || fail "muster-harness scale exited with $rc"
k delete namespace "$ns" --wait=false >/dev/null
