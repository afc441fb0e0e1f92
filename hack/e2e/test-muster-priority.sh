#!/usr/bin/env bash
# e2e: a PriorityClass made while muster runs is known at once (the configuration is reloaded, as
# for a Queue), so a Job naming it is admitted and runs instead of being refused as naming an
# unknown class until muster restarts. And a class muster knows orders the queue: of two Jobs
# waiting for the same nodes, the one of the higher class goes first.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-priority
pc=e2e-made-late
echo "test-muster-priority" >&2
trap 'k delete priorityclass $pc --ignore-not-found >/dev/null; muster_down' EXIT
muster_up
fresh_namespace $ns
k delete priorityclass $pc --ignore-not-found >/dev/null
k create -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: $pc}
value: 500
YAML
with_class() { sed "s/^      restartPolicy: Never/      priorityClassName: $pc\n      restartPolicy: Never/"; }
# The whole worker pool for 4 s, then two Jobs that each need all of it again: the later one
# names the new class.
queued_job_yaml first 100 cpu=100 run=4 | k -n $ns create -f - >/dev/null
eventually 30 "the first Job runs" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev first -o jsonpath='{.status.phase}') =~ Admitted|Running ]]"
queued_job_yaml plain 100 cpu=100 run=2 | k -n $ns create -f - >/dev/null
sleep 1
queued_job_yaml urgent 100 cpu=100 run=2 | with_class | k -n $ns create -f - >/dev/null
eventually 30 "the Group carries the class" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev urgent -o jsonpath='{.spec.priorityClassName}' 2>/dev/null) == $pc ]]"
eventually 60 "the Job naming the class made after muster started completes" job_complete $ns urgent
eventually 60 "the plain Job completes too" job_complete $ns plain
ended() { k -n $ns get job "$1" -o jsonpath='{.status.completionTime}'; }
# (Not startTime: a Job reserved to start soon is released ahead, so both are resumed at once.)
check "the Job of the higher class ran first (done $(ended urgent), the other $(ended plain))" \
  test "$(ended urgent)" \< "$(ended plain)"
k delete namespace $ns --wait=false >/dev/null
