#!/usr/bin/env bash
# e2e, issue scenario 5, on scenarios/clusters/seed-deadlock.yaml (4 nodes, 6 pods of 316Mi
# each): pods of another scheduler on muster's nodes use capacity muster does not give away;
# a label put on a node while muster runs is matched at once; a group on a cordoned cluster
# waits, not Unsatisfiable; a node deleted under a running group releases the group, which runs again, whole, on the
# nodes that are left; deleting the namespace then makes muster write nothing into it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-nodes
other=e2e-muster-other
echo "test-muster-nodes" >&2
cleanup() {
  muster_down
  k uncordon $(k get nodes -o name) >/dev/null 2>&1 || true
  "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml" >/dev/null 2>&1 || true
}
trap cleanup EXIT
muster_up
fresh_namespace $ns
fresh_namespace $other

nodes_of() { # nodes_of JOB: distinct nodes of its bound, unfinished pods
  k -n $ns get pods -l job-name="$1" -o jsonpath='{range .items[*]}{.spec.nodeName}:{.status.phase}{"\n"}{end}' |
    awk -F: '$1!="" && $2!="Succeeded" && $2!="Failed" {print $1}' | sort -u | tr '\n' ' '
}
running() { [[ $(group_phase $ns "$1") == Running ]]; }

# --- another scheduler's pod -------------------------------------------------------------
cat <<YAML | k -n $other create -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  nodeSelector: {kubernetes.io/hostname: worker-0}
  terminationGracePeriodSeconds: 0
  containers:
  - {name: main, image: kwok-fake, resources: {requests: {memory: 1900Mi, cpu: 100m}}}
YAML
eventually 30 "the default scheduler runs a 1900Mi pod on worker-0" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $other get pod hog -o jsonpath='{.status.phase}') == Running ]]"
queued_job_yaml wide 18 memory=316Mi run=600 indexed=1 | k -n $ns create -f - >/dev/null
eventually 60 "an 18-pod group runs (3 nodes' worth)" running wide
check "none of its pods is on worker-0, beside the other scheduler's pod ($(nodes_of wide))" \
  bash -c "[[ ' $(nodes_of wide)' != *' worker-0 '* ]]"
queued_job_yaml late 6 memory=316Mi run=600 | k -n $ns create -f - >/dev/null
sleep 5
check "a 6-pod group waits while the other scheduler's pod holds worker-0 ($(group_phase $ns late))" \
  bash -c "[[ '$(group_phase $ns late)' == Queued || '$(group_phase $ns late)' == Reserved ]]"
k -n $other delete pod hog --wait=true >/dev/null
eventually 60 "once that pod is gone, the waiting group runs" running late
check "on worker-0 ($(nodes_of late))" test "$(nodes_of late)" = "worker-0 "
k -n $ns delete job wide late --wait=true >/dev/null
eventually 60 "their pods are gone" bash -c "[[ -z \$('$K8S_BIN/kubectl' -n $ns get pods -o name) ]]"

# --- a node labelled while muster runs ---------------------------------------------------
queued_job_yaml picky 2 memory=316Mi run=600 |
  sed 's/^      restartPolicy: Never/      nodeSelector: {e2e.muster.dev\/pool: late}\n      restartPolicy: Never/' |
  k -n $ns create -f - >/dev/null
sleep 3
check "a group for nodes labelled e2e.muster.dev/pool=late, which none is, waits ($(group_phase $ns picky))" \
  bash -c "[[ '$(group_phase $ns picky)' != Admitted && '$(group_phase $ns picky)' != Running ]]"
k label node worker-1 e2e.muster.dev/pool=late >/dev/null
eventually 30 "once worker-1 has the label, it runs, without a restart of muster" running picky
check "on worker-1 ($(nodes_of picky))" test "$(nodes_of picky)" = "worker-1 "
k label node worker-1 e2e.muster.dev/pool- >/dev/null
k -n $ns delete job picky --wait=true >/dev/null
eventually 60 "its pods are gone" bash -c "[[ -z \$('$K8S_BIN/kubectl' -n $ns get pods -o name) ]]"

# --- a cordoned cluster ------------------------------------------------------------------
# Kubernetes mirrors a cordon as the taint node.kubernetes.io/unschedulable; muster reads the
# cordon itself, so a group waits for the nodes instead of being marked Unsatisfiable.
workers=$(k get nodes -o name | grep worker- | tr '\n' ' ')
k cordon $workers >/dev/null
eventually 30 "the cordon taint is on the nodes" bash -c \
  "'$K8S_BIN/kubectl' get nodes -o jsonpath='{.items[*].spec.taints[*].key}' | grep -q node.kubernetes.io/unschedulable"
queued_job_yaml patient 2 memory=316Mi run=600 | k -n $ns create -f - >/dev/null
sleep 5
unsat=$(k -n $ns get groups.muster.dev patient -o jsonpath='{.status.conditions[?(@.type=="Unsatisfiable")].status}')
check "a group on a cordoned cluster waits ($(group_phase $ns patient)), not Unsatisfiable ($unsat)" \
  bash -c "[[ '$(group_phase $ns patient)' == Queued && '$unsat' != True ]]"
k uncordon $workers >/dev/null
eventually 30 "once the nodes are uncordoned, it runs" running patient
k -n $ns delete job patient --wait=true >/dev/null
eventually 60 "its pods are gone" bash -c "[[ -z \$('$K8S_BIN/kubectl' -n $ns get pods -o name) ]]"

# --- a node deleted under a running group ------------------------------------------------
queued_job_yaml steady 12 memory=316Mi run=600 indexed=1 | k -n $ns create -f - >/dev/null
eventually 60 "a 12-pod group runs" running steady
victim=$(nodes_of steady | awk '{print $1}')
before=$(nodes_of steady)
k delete node "$victim" --wait=false >/dev/null
pass "deleted node $victim under it (it ran on: $before)"
evicted() {
  [[ $(k -n $ns get groups.muster.dev steady -o jsonpath='{.status.requeue.count}') -ge 1 ]]
}
eventually 60 "the group is released and requeued (requeue count >= 1)" evicted
moved() { running steady && [[ -n $(nodes_of steady) && " $(nodes_of steady)" != *" $victim "* ]] &&
  [[ $(k -n $ns get pods -l job-name=steady --field-selector status.phase=Running -o name | wc -l) -eq 12 ]]; }
eventually 90 "it runs again, whole (12 pods), without $victim" moved
eventually 3 "every pod on the node its Group assigned" placed_on_assigned $ns steady

# --- the namespace deleted under the running group -----------------------------------------
# Its pods go before its Job: muster writes nothing into a namespace being deleted (no readiness
# drop in the status, no events, no delete of a Group the collector removes).
sleep 3
writes=$(group_status_writes)
k delete namespace $ns --wait=true --timeout=120s >/dev/null
check "the namespace's teardown made muster write no Group status ($writes, then $(group_status_writes))" \
  test "$(group_status_writes)" = "$writes"
k delete namespace $other --wait=false >/dev/null
