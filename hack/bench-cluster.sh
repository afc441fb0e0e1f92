#!/usr/bin/env bash
# make bench-cluster: how fast the harness control plane (default kube-scheduler, real Job
# controller, KWOK nodes) takes 1000 pods from created to bound to Succeeded.
#
#   hack/bench-cluster.sh            (JOBS=100 PODS=10 RUN=5 AFTER=all-ready)
#
# Starts a private cluster in $MUSTER_BENCH_DIR (default ~/.cache/muster/bench-cluster)
# with the nodes of scenarios/clusters/seed-scalability.yaml (100 x 100 cpu / 100Gi), times
# that warm start, creates JOBS Jobs of PODS pods (2 cpu / 2Gi each, as in seed 002) in one
# request, waits until every Job completed, reads the phases' times off the objects, prints
# them, and stops everything it started.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export MUSTER_CLUSTER_DIR=${MUSTER_BENCH_DIR:-$MUSTER_CACHE/bench-cluster}
export KUBECONFIG=$MUSTER_CLUSTER_DIR/kubeconfig
JOBS=${JOBS:-100} PODS=${PODS:-10} RUN=${RUN:-5} AFTER=${AFTER:-all-ready}
CLUSTER_FILE=${CLUSTER_FILE:-$repo_dir/scenarios/clusters/seed-scalability.yaml}
TIMEOUT=${TIMEOUT:-900}
k() { "$K8S_BIN/kubectl" "$@"; }
now() { date +%s.%N; }
tmp=$(mktemp -d)

"$hack_dir/cluster-build.sh"
resolve_muster_bin
"$hack_dir/cluster-down.sh" >/dev/null 2>&1 || true
trap '"$hack_dir/cluster-down.sh"; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
# Build the node list first so that the start time below is the control plane's alone.
"$hack_dir/cluster-nodes.sh" --print "$CLUSTER_FILE" > "$tmp/nodes.json" 2>/dev/null ||
  die "cannot produce the node list for $CLUSTER_FILE"
t=$(now)
MUSTER_NODES_JSON=$tmp/nodes.json "$hack_dir/cluster-up.sh" "$CLUSTER_FILE" >/dev/null
start_s=$(python3 -c "print(f'{$(now) - $t:.1f}')")
nodes=$(k get nodes --no-headers | wc -l)

k create namespace bench >/dev/null
until k -n bench get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
python3 - "$JOBS" "$PODS" "$RUN" "$AFTER" > "$tmp/jobs.json" <<'EOF'
import json, sys
jobs, pods, run, after = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
items = [{
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": f"bench-{i:04d}"},
    "spec": {
        "parallelism": pods, "completions": pods, "backoffLimit": 0,
        "activeDeadlineSeconds": 900,
        "template": {
            "metadata": {"annotations": {"kwok.muster.dev/run-seconds": run,
                                         "kwok.muster.dev/run-after": after}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "job", "image": "kwok-fake",
                                     "resources": {"requests": {"cpu": "2", "memory": "2Gi"},
                                                   "limits": {"cpu": "2", "memory": "2Gi"}}}]}},
    },
} for i in range(jobs)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
EOF

total=$((JOBS * PODS))
log "creating $JOBS Jobs x $PODS pods ($total pods, run ${RUN}s after $AFTER) on $nodes nodes"
t0=$(now)
k -n bench create -f "$tmp/jobs.json" >/dev/null
deadline=$(( $(date +%s) + TIMEOUT ))
while :; do
  done_jobs=$(k -n bench get jobs -o jsonpath='{range .items[*]}{.status.succeeded}{"\n"}{end}' | awk -v p="$PODS" '$1==p' | wc -l)
  (( done_jobs == JOBS )) && break
  (( $(date +%s) < deadline )) || die "only $done_jobs of $JOBS Jobs complete after ${TIMEOUT}s"
  sleep 2
done
t_end=$(now)
# Completion is counted by succeeded pods; give the Job controller a moment to mark the Jobs.
sleep 3
k -n bench get pods -o json > "$tmp/pods.json"
k -n bench get jobs -o json > "$tmp/jobsdone.json"

python3 - "$t0" "$t_end" "$tmp/pods.json" "$tmp/jobsdone.json" "$total" "$start_s" "$nodes" "$RUN" "$AFTER" <<'EOF'
import json, sys, datetime as dt
t0, t_end = float(sys.argv[1]), float(sys.argv[2])
pods = json.load(open(sys.argv[3]))["items"]
jobs = json.load(open(sys.argv[4]))["items"]
total, start_s, nodes, run, after = int(sys.argv[5]), sys.argv[6], sys.argv[7], sys.argv[8], sys.argv[9]
ts = lambda s: dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()
def cond(p, t):
    return next((c for c in p["status"].get("conditions") or [] if c["type"] == t), None)
created = [ts(p["metadata"]["creationTimestamp"]) for p in pods]
bound = [ts(cond(p, "PodScheduled")["lastTransitionTime"]) for p in pods if cond(p, "PodScheduled")]
started = [ts(p["status"]["startTime"]) for p in pods if p["status"].get("startTime")]
finished = [ts(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
            for p in pods if p["status"].get("phase") == "Succeeded"]
complete = [ts(j["status"]["completionTime"]) for j in jobs if j["status"].get("completionTime")]
rel = lambda xs: f"{max(xs) - t0:6.1f}s" if xs else "   n/a"
print(f"warm start (cluster-up, {nodes} nodes): {start_s}s")
print(f"{total} pods ({len(jobs)} Jobs), run {run}s after {after}; times from the create request:")
print(f"  all pods created     {rel(created)}   ({len(created)})")
print(f"  all pods bound       {rel(bound)}   ({len(bound)})")
print(f"  all pods running     {rel(started)}   ({len(started)})")
print(f"  all pods Succeeded   {rel(finished)}   ({len(finished)})")
print(f"  all Jobs Complete    {rel(complete)}   ({len(complete)})")
print(f"  observed by polling  {t_end - t0:6.1f}s")
print(f"  (timestamps have 1 s resolution; the run time itself is {run}s)")
EOF
