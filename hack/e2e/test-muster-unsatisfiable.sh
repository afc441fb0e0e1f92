#!/usr/bin/env bash
# e2e, issue scenario 6: a group larger than the cluster is marked Unsatisfiable with a clear
# reason, stays held (no pod is created), and is not retried: one event, not one per cycle.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-unsat
echo "test-muster-unsatisfiable" >&2
trap muster_down EXIT
muster_up
fresh_namespace $ns
# More memory per pod than any node has, and more pods than the cluster could ever hold.
queued_job_yaml giant 5000 memory=64Gi cpu=1 | k -n $ns create -f - >/dev/null
unsat() {
  [[ $(k -n $ns get groups.muster.dev giant -o jsonpath='{.status.conditions[?(@.type=="Unsatisfiable")].status}' 2>/dev/null) == True ]]
}
eventually 30 "the group is marked Unsatisfiable" unsat
msg=$(k -n $ns get groups.muster.dev giant -o jsonpath='{.status.conditions[?(@.type=="Unsatisfiable")].message}')
echo "  ..   message: $msg" >&2
check "the reason says how much is needed and what the cluster holds" grep -q "needs 5000 members.*holds" <<<"$msg"
check "the group waits in its queue (phase Queued)" test "$(group_phase $ns giant)" = Queued
pending() {
  local n
  n=$(k get queues.muster.dev default -o jsonpath='{.status.pendingGroups}' 2>/dev/null) || n=0
  (( ${n:-0} >= 1 ))
}
eventually 15 "the Queue's status counts it among its pending groups" pending
sleep 6
events() { k -n $ns get events --field-selector reason=Unsatisfiable,involvedObject.kind=Job -o jsonpath='{range .items[*]}{.count}{.series.count} {end}'; }
n=$(k -n $ns get events --field-selector reason=Unsatisfiable,involvedObject.kind=Job -o name | wc -l)
check "one Unsatisfiable event on the job, not one per cycle ($n; counts: $(events))" test "$n" -eq 1 -a -z "$(events | tr -d ' 1')"
check "the job is still suspended" test "$(k -n $ns get job giant -o jsonpath='{.spec.suspend}')" = true
check "no pod was created" test "$(k -n $ns get pods -o name | wc -l)" -eq 0
k delete namespace $ns --wait=false >/dev/null
