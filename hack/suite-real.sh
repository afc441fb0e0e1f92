#!/usr/bin/env bash
# A suite scenario on the real control plane under several schedulers, one after the other, each
# on a fresh private cluster with the scenario's nodes (docs/benchmarks.md, "The suite on the real
# control plane"):
#
#   hack/suite-real.sh SCENARIO OUT_DIR PEER...   (PEER: default muster kueue coscheduling volcano native)
#
# With ROUNDS=N (default 1) the peers run N times in turn (round 1 of each, then round 2, ...), so
# drift of the machine spreads over all of them; run K of PEER is then OUT_DIR/PEER.K.json.
# `muster-harness summary OUT_DIR --lower-bound S` reads them all into one table with the spread.
#
# Per peer: start the cluster (hack/cluster-up.sh with the scenario's cluster file), bring the
# scheduler up (hack/peers/NAME.sh up; muster: hack/e2e/muster.sh), create its cluster-wide objects
# (Kueue: `muster-harness objects --peer kueue --setup`), then `muster-harness run` submits each Job
# of the scenario (seed $SEED, default 1) at its time, with the peer's own objects, waits until all
# end (or $TIMEOUT s, default 1800) and writes OUT_DIR/PEER.json (with the Jobs' waits for their first
# bind and bounded slowdowns, overall and per class, and the GPUs, cpu and memory held, and held by
# jobs not yet running, from a watch on the pods; for a scenario with tenants, each tenant's
# shortfall, wait within quota, work lost and evictions, printed as a table too). Beside it OUT_DIR/PEER.cost.json:
# the CPU seconds of the scheduler's own processes (kube-scheduler for default and native, Kueue's
# manager plus kube-scheduler for kueue) and the
# write requests the apiserver served during the run (every client: the Job controller and KWOK
# write too, the same for every peer); for muster, OUT_DIR/PEER.metrics.txt, its /metrics at the
# end. Then the cluster stops, and the next peer gets a new one.
#
# The clusters run with kube-scheduler's TopologyAwareWorkloadScheduling gate (alpha in 1.37) on
# (hack/cluster-up.sh turns it on for every cluster), so native gangs can honour a required
# topology constraint.
set -euo pipefail
. "$(dirname "$0")/e2e/lib.sh"
(( $# >= 3 )) || die "usage: hack/suite-real.sh SCENARIO OUT_DIR PEER..."
scenario=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out_dir=$2
shift 2
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
export MUSTER_CLUSTER_DIR=${MUSTER_SUITE_DIR:-$MUSTER_CACHE/suite-cluster}
export KUBECONFIG=$MUSTER_CLUSTER_DIR/kubeconfig
cluster=$(python3 -c '
import os, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"^cluster:\s*(\S+)", text, re.M) or sys.exit("no cluster: in " + sys.argv[1])
print(os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), m.group(1))))' "$scenario")
ns=suite
# 1 when a job class of the scenario has a topology constraint.
topology=$(grep -qE '^\s+topology:' "$scenario" && echo 1 || echo 0)
# 1 when the scenario has tenants: each gets a namespace and the peer's queue (muster-harness
# objects --setup), Volcano runs with reclaim and the capacity plugin, and each run reports the
# tenants' figures.
tenants=$(grep -qE '^tenants:' "$scenario" && echo 1 || echo 0)
# 1 when a job class is given as sets of pods: muster and Kueue take such a job as a JobSet (the
# JobSet controller runs beside them), Volcano as a Volcano Job.
sets=$(grep -qE '^\s+sets:' "$scenario" && echo 1 || echo 0)
# Kueue's fair sharing, when the scenario's kueue block turns it on: its strategies, comma-separated.
fair_sharing=$(python3 - "$scenario" <<'PY'
import sys, yaml
fs = (yaml.safe_load(open(sys.argv[1])).get("kueue") or {}).get("fairSharing")
if fs is not None:
    print(",".join(fs.get("preemptionStrategies") or ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]))
PY
)

"$hack_dir/cluster-build.sh"
resolve_harness_bin release
# A release build of muster, as deployed (the debug build binds more slowly).
if [[ -z ${MUSTER_BIN:-} ]]; then
  (cd "$repo_dir" && cargo build -q --release -p muster) || die "cargo build --release -p muster failed"
  export MUSTER_BIN=$repo_dir/target/release/muster
fi
"$MUSTER_HARNESS_BIN" jobs "$scenario" "${SEED:-1}" "$out_dir/jobs.json"
if (( tenants )); then
  "$MUSTER_HARNESS_BIN" volcano-tenants-conf "$scenario" > "$out_dir/volcano-scheduler.conf"
  export VOLCANO_SCHEDULER_CONF=$out_dir/volcano-scheduler.conf
fi
trap '"$hack_dir/cluster-down.sh"' EXIT

# cpu_seconds PIDFILE...: user + system CPU seconds of the live processes named by the pid files.
cpu_seconds() {
  python3 -c '
import os, sys
tick = os.sysconf("SC_CLK_TCK")
total = 0.0
for f in sys.argv[1:]:
    try:
        pid = open(f).read().split()[0]
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    except (OSError, IndexError, ValueError):
        pass
print(round(total, 2))' "$@"
}

# writes: write requests (POST, PUT, PATCH, DELETE) the apiserver has served since it started.
writes() {
  k get --raw /metrics | python3 -c '
import re, sys
n = 0.0
for line in sys.stdin:
    m = re.match(r"apiserver_request_total\{(.*)\} (\S+)$", line)
    if m and re.search(r"verb=\"(POST|PUT|PATCH|DELETE|APPLY)\"", m.group(1)):
        n += float(m.group(2))
print(int(n))'
}

# sets_hold_what_pods_ask GROUPS_JSON PODS_JSON: for every pod of a muster Group of several sets,
# whether the set its member is in holds what the pod asks (nothing held that no pod asks for).
sets_hold_what_pods_ask() {
  python3 - "$1" "$2" "$hack_dir/e2e" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
from overcommit import pod_requests, qty
groups = {g["metadata"]["name"]: g["spec"] for g in json.load(open(sys.argv[1]))["items"]}
bad, checked, unmatched = [], 0, 0
for p in json.load(open(sys.argv[2]))["items"]:
    group = (p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name")
    member = (p["metadata"].get("annotations") or {}).get("muster.dev/member")
    spec = groups.get(group)
    if spec is None or member is None:
        unmatched += 1
        continue
    first = 0
    for s in spec.get("sets") or []:
        n = s["members"].get("max") or s["members"]["min"]
        if first <= int(member) < first + n:
            holds = {r: qty(v) for r, v in (s.get("resources") or {}).items() if qty(v)}
            asks = {r: v for r, v in pod_requests(p["spec"]).items() if r != "pods" and v}
            if asks != holds:
                bad.append(f"{p['metadata']['name']} (set {s['name']}) asks {asks}, holds {holds}")
            checked += 1
            break
        first += n
    else:
        bad.append(f"{p['metadata']['name']}: member {member} in no set of group {group}")
print(f"sets hold what their pods ask: {checked} pods of {len(groups)} groups checked, {len(bad)} differ, "
      f"{unmatched} pods without a group or member")
for b in bad[:10]:
    print("  " + b)
PY
}

# run_one PEER RUN: one run of PEER on a fresh cluster, written to OUT_DIR/RUN.json.
run_one() {
  local peer=$1 run=$2 pidfiles=() cpu0 writes0 setup
  "$hack_dir/cluster-up.sh" "$cluster" >/dev/null
  case $peer in
    default|native) pidfiles=("$MUSTER_CLUSTER_DIR"/run/kube-scheduler.pid) ;;
    muster)
      . "$hack_dir/e2e/muster.sh"
      (( sets )) && jobset_controller_up "$MUSTER_CLUSTER_DIR/jobset" "$out_dir/$run.jobset.log"
      # Measured as deployed: no decision log beside the bindings.
      MUSTER_E2E_LOG=${MUSTER_E2E_LOG:-info,kube=warn} muster_up
      pidfiles=("$muster_dir/pid") ;;
    kueue|coscheduling|volcano)
      if (( sets )) && [[ $peer == kueue ]]; then
        . "$hack_dir/e2e/muster.sh"
        jobset_controller_up "$MUSTER_CLUSTER_DIR/jobset" "$out_dir/$run.jobset.log"
      fi
      # Volcano honours a scenario's topology with its network-topology-aware plugin.
      KUEUE_JOBSET=$sets KUEUE_FAIR_SHARING=$fair_sharing VOLCANO_NETWORK_TOPOLOGY=$topology "$hack_dir/peers/$peer.sh" up
      pidfiles=("$MUSTER_CLUSTER_DIR/$peer"/*.pid)
      # Kueue admits; kube-scheduler places its pods.
      [[ $peer == kueue ]] && pidfiles+=("$MUSTER_CLUSTER_DIR"/run/kube-scheduler.pid) ;;
    *) die "unknown peer $peer (default muster kueue coscheduling volcano native)" ;;
  esac
  k create namespace "$ns" >/dev/null
  # Cluster-wide objects: Kueue's queues (and TAS Topology), Volcano's HyperNodes; with tenants,
  # every tenant's namespace and queue (muster's too).
  if [[ $peer == kueue || $peer == volcano || ( $peer == muster && $tenants == 1 ) ]]; then
    setup=$("$MUSTER_HARNESS_BIN" objects "$scenario" --peer "$peer" --setup --namespace "$ns")
    [[ -z $setup ]] || k apply -f - >/dev/null <<<"$setup"
  fi
  cpu0=$(cpu_seconds "${pidfiles[@]}")
  writes0=$(writes)
  "$MUSTER_HARNESS_BIN" run "$out_dir/jobs.json" "$KUBECONFIG" "$ns" "$out_dir/$run.json" "${TIMEOUT:-1800}" \
    --peer "$peer" --scenario "$scenario" --seed "${SEED:-1}"
  printf '{"scheduler_cpu_s": %s, "apiserver_writes": %s}\n' \
    "$(python3 -c "print(round($(cpu_seconds "${pidfiles[@]}") - $cpu0, 2))")" "$(( $(writes) - writes0 ))" \
    > "$out_dir/$run.cost.json"
  python3 -c '
import json, sys
r, c, peer = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
t = r.get("topology") or {}
w = r.get("waits") or {}
o = w.get("overall") or {}
u = r.get("occupancy") or {}
longest = ", ".join("%s %s" % (k, v.get("max_s")) for k, v in sorted((w.get("classes") or {}).items()))
print("%s: completed %s failed %s unfinished %s makespan %s s; spread %s/%s (required %s); scheduler cpu %s s; "
      "apiserver writes %s; wait mean/p95/max %s/%s/%s s (%s never bound), bounded slowdown %s; "
      "longest wait by class (s): %s; occupancy gpu/cpu %s/%s, held by jobs not running: %s GPU-s, %s core-s "
      "(share %s)" % (peer, r["completed"], r["failed"], r["unfinished"], r["makespan_s"],
      t.get("spread", "-"), t.get("constrained", "-"), t.get("spread_required", "-"), c["scheduler_cpu_s"],
      c["apiserver_writes"], o.get("mean_s", "-"), o.get("p95_s", "-"), o.get("max_s", "-"),
      o.get("unbound", "-"), o.get("bounded_slowdown", "-"), longest or "-", u.get("mean_util_gpu", "-"),
      u.get("mean_util_cpu", "-"), u.get("clog_gpu_s", "-"), u.get("clog_cpu_core_s", "-"), u.get("clog_share", "-")))' \
    "$out_dir/$run.json" "$out_dir/$run.cost.json" "$run"
  if [[ $peer == muster ]]; then
    # muster's own metrics at the end of the run (its admission delays among them).
    curl -s --max-time 5 "http://127.0.0.1:$(cat "$muster_dir/metrics-port")/metrics" > "$out_dir/$run.metrics.txt" || true
    # What each group holds per set, and what its pods ask (docs/benchmarks.md, "Member sets").
    if (( sets )); then
      # Not *.json in OUT_DIR itself, which `muster-harness summary` reads as runs.
      mkdir -p "$out_dir/$run.objects"
      k -n "$ns" get groups.muster.dev -o json > "$out_dir/$run.objects/groups.json"
      k -n "$ns" get pods -o json > "$out_dir/$run.objects/pods.json"
      sets_hold_what_pods_ask "$out_dir/$run.objects/groups.json" "$out_dir/$run.objects/pods.json" |
        tee "$out_dir/$run.sets-hold.txt"
    fi
    muster_down
    (( sets )) && jobset_controller_down
  fi
  [[ -x $hack_dir/peers/$peer.sh ]] && "$hack_dir/peers/$peer.sh" down
  if (( sets )) && [[ $peer == kueue ]]; then jobset_controller_down; fi
  "$hack_dir/cluster-down.sh"
}

rounds=${ROUNDS:-1}
for round in $(seq "$rounds"); do
  for peer in "$@"; do
    log "== $peer on $(basename "$scenario") (round $round of $rounds)"
    if (( rounds == 1 )); then run_one "$peer" "$peer"; else run_one "$peer" "$peer.$round"; fi
  done
done
"$MUSTER_HARNESS_BIN" summary "$out_dir"
