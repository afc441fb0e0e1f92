#!/usr/bin/env bash
# e2e, peer: the real Kueue with fair sharing on (KUEUE_FAIR_SHARING, hack/peers/kueue.sh), the
# case the sim's Kueue model pins in crates/muster-sim/tests/kueue_tenants.rs
# (fair_sharing_takes_from_the_queue_borrowing_most_for_a_queue_that_borrows_too). ClusterQueues
# a and b (nominal 200m cpu each) and c (400m, no jobs) in cohort lab; a runs five 100m jobs
# (borrowing 300m), b three (borrowing 100m), filling the cohort. b's fourth job would leave b
# borrowing 200m, as a does once one of its jobs is gone: Kueue's fair sharing preempts one of a's
# (reason InCohortFairSharing) and admits it. Without fair sharing b, borrowing, reclaims nothing
# and the job waits. Run only when named: hack/e2e/run.sh peer-kueue-fair (make peers).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

queues=(a b c)
kueue_fair_teardown() { # Kueue's cluster-scoped objects, while Kueue (their finalizers) still runs
  local q
  for q in "${queues[@]}"; do
    k delete clusterqueue "$q" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  done
  k delete cohort lab --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete resourceflavor default-flavor --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
}
peer_test kueue kueue_fair_teardown
KUEUE_FAIR_SHARING=LessThanOrEqualToFinalShare,LessThanInitialShare "$hack_dir/peers/kueue.sh" up
grep -q '^fairSharing:' "$MUSTER_CLUSTER_DIR/kueue/config.yaml" || fail "kueue.sh wrote no fairSharing"
pass "Kueue $KUEUE_VERSION up with fair sharing"
fresh_namespace "$ns"

cluster_queue() { # cluster_queue NAME CPU_NOMINAL RECLAIM
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $1}
spec:
  cohortName: lab
  namespaceSelector: {}
  fairSharing: {weight: "1"}
  preemption: {reclaimWithinCohort: $3, withinClusterQueue: Never}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: $2}
      - {name: memory, nominalQuota: 1Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: $ns, name: $1}
spec: {clusterQueue: $1}
YAML
}
{
  printf 'apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default-flavor}\n'
  printf -- '---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: lab}\nspec: {}\n'
  cluster_queue a 200m Never
  cluster_queue b 200m Any
  cluster_queue c 400m Never
} | k apply -f - >/dev/null
for q in "${queues[@]}"; do
  eventually 30 "ClusterQueue $q is Active" bash -c \
    "[[ \$('$K8S_BIN/kubectl' get clusterqueue $q -o jsonpath='{.status.conditions[?(@.type==\"Active\")].status}') == True ]]"
done

# submit QUEUE NAME RUN_SECONDS: a one-pod 100m Job, suspended, in QUEUE's LocalQueue.
submit() {
  job_yaml "$2" 1 cpu=100m run="$3" \
    | sed -e "s/^metadata:/metadata:\n  labels: {kueue.x-k8s.io\/queue-name: $1}/" -e 's/^spec:/spec:\n  suspend: true/' \
    | k -n "$ns" create -f - >/dev/null
}
# holding QUEUE N: whether N of the queue's Workloads hold quota now.
holding() {
  local n
  n=$(k -n "$ns" get workloads.kueue.x-k8s.io -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
held = lambda w: any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in w.get("status", {}).get("conditions", []))
print(sum(held(w) for w in items if w["spec"]["queueName"] == sys.argv[1]))' "$1")
  [[ $n == "$2" ]]
}

for i in 1 2 3 4 5; do submit a "a$i" 600; done
eventually 60 "a's five jobs admitted (a borrows 300m of c's)" holding a 5
for i in 1 2 3; do submit b "b$i" 600; done
eventually 60 "b's three jobs admitted (the cohort is full)" holding b 3
submit b b-more 60
eventually 60 "b's fourth job is admitted" holding b 4
reasons=$(k -n "$ns" get workloads.kueue.x-k8s.io -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    for c in w.get("status", {}).get("conditions", []):
        if c["type"] == "Preempted" and c["status"] == "True":
            print(w["spec"]["queueName"], c["reason"])')
echo "  ..   preempted: ${reasons:-none}" >&2
check "one of a's jobs was preempted for fair sharing, and no other" test "$reasons" == "a InCohortFairSharing"
