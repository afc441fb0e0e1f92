#!/usr/bin/env bash
# e2e: a declared run time is a limit. In a Queue with runTimeLimit graceSeconds 5 (mode Enforce,
# the default) under conservative backfill: `first` holds every worker node (50 of 100 cpu each);
# `gang` (70 cpu on every worker node) is reserved for first's end; `liar`, one pod of 40 cpu that
# declares 1 s and runs forever, is backfilled at once beside first, on a node gang needs. muster
# ends liar at 1 s + 5 s (its Job fails with DeadlineExceeded, its Group with RunTimeExceeded),
# also across a SIGKILL of the controller while liar runs, and gang starts as soon as first ends.
# Before run times were limits, liar held its node and gang waited for as long as liar ran.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-run-limit
echo "test-muster-run-limit" >&2
muster_in_namespace $ns
trap 'muster_down; k delete queue limited --ignore-not-found >/dev/null 2>&1 || true
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true' EXIT
k apply -f - >/dev/null <<'YAML'
apiVersion: muster.dev/v1alpha1
kind: Queue
metadata: {name: limited}
spec:
  policy: {kind: conservative}
  runTimeLimit: {graceSeconds: 5}
YAML
check "the Queue reads back its runTimeLimit" test \
  "$(k get queue limited -o jsonpath='{.spec.runTimeLimit.graceSeconds}')" = 5

# limited NAME PODS CPU DECLARED [RUN]: a Job in queue limited declaring DECLARED seconds; its pods
# run RUN seconds once started (forever without RUN).
limited() {
  job_yaml "$1" "$2" cpu="$3" ${5:+run=$5} |
    sed "s/^metadata:/metadata:\n  labels: {muster.dev\/queue: limited}\n  annotations: {muster.dev\/duration-seconds: \"$4\"}/" |
    k -n $ns create -f - >/dev/null
}
phase() { group_phase $ns "$1"; }

limited first 100 50 60 20
eventually 30 "first takes every worker node" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev first -o jsonpath='{.status.phase}') == Running ]]"
limited gang 100 70 30 5
eventually 15 "gang is reserved for first's end" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev gang -o jsonpath='{.status.phase}') == Reserved ]]"
limited liar 1 40 1
eventually 15 "liar, declaring 1 s, is backfilled beside first" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev liar -o jsonpath='{.status.phase}') == Running ]]"
liar_node=$(k -n $ns get pods -l job-name=liar -o jsonpath='{.items[0].spec.nodeName}')
echo "  ..   liar runs on $liar_node, where gang has a member" >&2

# The limit is the store's: a controller killed while liar runs, and started again, still ends it.
muster_kill
sleep 2
muster_start
eventually 30 "liar is ended at its run time and grace" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev liar -o jsonpath='{.status.phase}') == Failed ]]"
check "its Group says why (condition RunTimeExceeded)" test "$(k -n $ns get groups.muster.dev liar \
  -o jsonpath='{.status.conditions[?(@.type=="RunTimeExceeded")].status}')" = True
eventually 30 "its Job failed at the deadline muster set (DeadlineExceeded)" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get job liar -o jsonpath='{.status.conditions[?(@.type==\"Failed\")].reason}') == DeadlineExceeded ]]"
eventually 30 "its pod is gone" bash -c "[[ -z \$('$K8S_BIN/kubectl' -n $ns get pods -l job-name=liar -o name) ]]"
check "a warning event on the Job says so" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get events --field-selector involvedObject.name=liar,reason=RunTimeExceeded -o name | grep -q ."
check "muster_run_time_exceeded_total counts it" \
  test "$(muster_metric 'muster_run_time_exceeded_total{queue="limited"}')" = 1

# gang starts once first ends (first runs 20 s); with liar still on its node it would wait.
eventually 60 "first completes" job_complete $ns first
first_done=$(k -n $ns get job first -o jsonpath='{.status.completionTime}')
eventually 30 "gang runs after first, on every worker node" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev gang -o jsonpath='{.status.phase}') =~ ^(Running|Succeeded)$ ]]"
echo "  ..   first completed at $first_done; gang: $(k -n $ns get groups.muster.dev gang -o jsonpath='{.status.conditions[?(@.type=="Admitted")].lastTransitionTime}')" >&2
check "gang's member on $liar_node" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get groups.muster.dev gang -o jsonpath='{.status.allocation[*].node}' | grep -qw $liar_node"
eventually 60 "gang completes" job_complete $ns gang
check "first, which kept to its run time, succeeded" test "$(phase first)" = Succeeded
