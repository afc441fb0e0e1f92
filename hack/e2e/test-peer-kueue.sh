#!/usr/bin/env bash
# e2e, peer: seed 001 under the real Kueue (hack/peers/kueue.sh, docs/peers.md), not muster.
# Cluster: scenarios/clusters/seed-deadlock.yaml (4 nodes x 2107Mi). Kueue's waitForPodsReady page
# setup: a ResourceFlavor, a ClusterQueue whose memory quota is twice the nodes' allocatable memory
# (so quota alone lets both big jobs in), a LocalQueue; then the same jobs as test-deadlock.sh
# (a 50-pod quick job, two 20-pod indexed jobs of 316Mi pods that finish only once all 20 run),
# suspended and labelled kueue.x-k8s.io/queue-name. Checks every Job completes within
# PEER_TIMEOUT seconds (default 600); prints the wall time and the evictions Kueue recorded.
# Run only when named: hack/e2e/run.sh peer-kueue (make peers).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kueue_teardown() { # Kueue's cluster-scoped objects, while Kueue (their finalizers) still runs
  k delete clusterqueue cluster-queue --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete resourceflavor default-flavor --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
}
peer_test kueue kueue_teardown
"$hack_dir/peers/kueue.sh" up
pass "Kueue $KUEUE_VERSION up (manager, CRDs, webhooks on loopback)"
fresh_namespace "$ns"

# The page's preparation: total allocatable memory of the worker nodes, the quota twice that.
total=$(k get node --selector='!node-role.kubernetes.io/master,!node-role.kubernetes.io/control-plane' \
  -o jsonpath='{range .items[*]}{.status.allocatable.memory}{"\n"}{end}' | numfmt --from=auto | awk '{s+=$1} END {printf "%.0f\n", s}')
quota_mi=$(( 2 * total / 1048576 ))
echo "  ..   allocatable memory ${total} bytes; ClusterQueue memory quota ${quota_mi}Mi" >&2
k apply -f - >/dev/null <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["memory"]
    flavors:
    - name: default-flavor
      resources:
      - name: memory
        nominalQuota: ${quota_mi}Mi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: $ns, name: user-queue}
spec: {clusterQueue: cluster-queue}
YAML
eventually 30 "the ClusterQueue is Active" bash -c \
  "[[ \$('$K8S_BIN/kubectl' get clusterqueue cluster-queue -o jsonpath='{.status.conditions[?(@.type==\"Active\")].status}') == True ]]"

# kueue_job_yaml NAME PODS [key=value...]: job_yaml suspended, in user-queue, requesting memory only
# (the ClusterQueue covers memory alone, as on the page; a cpu request would make it inadmissible).
kueue_job_yaml() {
  job_yaml "$@" | sed -e 's/^metadata:/metadata:\n  labels: {kueue.x-k8s.io\/queue-name: user-queue}/' \
    -e 's/^spec:/spec:\n  suspend: true/' -e 's/cpu: "[^"]*", //'
}

kueue_stuck() { k -n "$ns" get workloads.kueue.x-k8s.io -o wide; }
seed001_jobs kueue_job_yaml
seed001_watch stuck=kueue_stuck

# Kueue's Workloads by their full name: from Kubernetes 1.37 `workloads` also names the native
# scheduling.k8s.io Workloads.
# Evictions: Kueue's own count per Workload (status.schedulingStats.evictions), and its events.
wl=$(k -n "$ns" get workloads.kueue.x-k8s.io -o json)
read -r nwl admitted finished evictions requeues <<<"$(python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
cond = lambda w, t: any(c["type"] == t and c["status"] == "True" for c in w.get("status", {}).get("conditions", []))
ev = sum(e.get("count", 0) for w in items for e in (w.get("status", {}).get("schedulingStats") or {}).get("evictions", []))
rq = sum((w.get("status", {}).get("requeueState") or {}).get("count", 0) for w in items)
print(len(items), sum(cond(w, "Admitted") for w in items), sum(cond(w, "Finished") for w in items), ev, rq)' <<<"$wl")"
evict_events=$(k -n "$ns" get events -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | grep -c -i evict || true)
check "Kueue made a Workload for each job ($nwl)" test "$nwl" -eq 3
check "every Workload was admitted and finished ($admitted admitted, $finished finished)" test "$finished" -eq 3
check_no_pod_failed
# When each big job was admitted (blockAdmission: job2 only after job1's pods are all ready).
for j in job1 job2; do
  echo "  ..   $j: $(k -n "$ns" get workloads.kueue.x-k8s.io -l kueue.x-k8s.io/job-uid="$(k -n "$ns" get job $j -o jsonpath='{.metadata.uid}')" \
    -o jsonpath='{range .items[*]}admitted {.status.conditions[?(@.type=="Admitted")].lastTransitionTime}, pods ready {.status.conditions[?(@.type=="PodsReady")].lastTransitionTime}{end}')" >&2
done
echo "  ..   samples with pods of both big jobs bound: $overlap" >&2
echo "result: peer=kueue-$KUEUE_VERSION seed=001 wall_seconds=$wall job_span_seconds=$(jobs_span "$ns") evictions=$evictions requeues=$requeues evict_events=$evict_events both_big_jobs_bound_samples=$overlap" >&2
