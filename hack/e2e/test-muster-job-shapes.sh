#!/usr/bin/env bash
# e2e: shapes of the Job API under muster. A Job whose completions exceed its parallelism is a
# group of `parallelism` members; its later pods take the members its finished pods leave, on the
# same nodes, and the Job completes. The same for an Indexed Job (completion indexes past the
# members). An Indexed Job resized while it waits (parallelism and completions together) runs at
# its new size. An elastic Indexed Job resized while it runs grows (its new pods bound to the
# members its Group gains) and shrinks (the members of the pods the Job controller deletes are
# released once those pods are gone), and keeps running throughout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-job-shapes
echo "test-muster-job-shapes" >&2
muster_in_namespace $ns

{ queued_job_yaml waves 2 completions=4 run=3; echo ---; queued_job_yaml indexed 2 completions=5 run=3 indexed=1; } |
  k -n $ns create -f - >/dev/null
declare -A placed
for job in waves indexed; do
  eventually 30 "the Group of Job $job has 2 members (parallelism, not completions)" bash -c \
    "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev $job -o jsonpath='{.spec.members.min}/{.spec.members.max}') == 2/ ]]"
  eventually 30 "Job $job is placed" bash -c \
    "[[ -n \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev $job -o jsonpath='{.status.allocation[*].node}') ]]"
  placed[$job]=$(k -n $ns get groups.muster.dev $job -o jsonpath='{range .status.allocation[*]}{.member}={.node} {end}')
done
eventually 90 "both Jobs complete" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get job waves indexed -o jsonpath='{.items[*].status.succeeded}') == '4 5' ]]"
for job in waves indexed; do
  # member=node of every pod: each must be one its Group was given while it ran.
  ran=$(k -n $ns get pods -l batch.kubernetes.io/job-name=$job \
    -o jsonpath='{range .items[*]}{.metadata.annotations.muster\.dev/member}={.spec.nodeName} {end}')
  stray=$(for p in $ran; do [[ " ${placed[$job]} " == *" $p "* ]] || echo "$p"; done)
  check "every pod of $job ($(wc -w <<<"$ran") of them) ran on a member its Group was given (${placed[$job]})" \
    test -z "$stray" -a "$(wc -w <<<"$ran")" -ge 4
done
eventually 30 "both Groups are Succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev waves indexed -o jsonpath='{.items[*].status.phase}') == 'Succeeded Succeeded' ]]"

# --- an elastic Indexed Job resized while it waits (seed 004's mutable completions) ----------
# 200 pods of 60 cpu need 200 of the 100 nodes: it waits. Resized to 4 (parallelism and
# completions together, as the Job API requires), its Group follows and it runs at 4.
queued_job_yaml elastic 200 cpu=60 indexed=1 run=3 | k -n $ns create -f - >/dev/null
eventually 30 "a Job of 200 pods of 60 cpu waits in the queue with 200 members" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev elastic -o jsonpath='{.spec.members.min}/{.status.phase}') == 200/Queued ]]"
k -n $ns patch job elastic --type merge -p '{"spec":{"parallelism":4,"completions":4}}' >/dev/null
eventually 30 "resized to 4 while it waits, its Group has 4 members" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev elastic -o jsonpath='{.spec.members.min}') == 4 ]]"
eventually 30 "it is placed with 4 members" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev elastic -o jsonpath='{.status.allocation[*].node}' | wc -w) -eq 4 ]]"
given=$(k -n $ns get groups.muster.dev elastic -o jsonpath='{range .status.allocation[*]}{.member}={.node} {end}')
eventually 60 "and it completes at its new size" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get job elastic -o jsonpath='{.status.succeeded}') == 4 ]]"
ran=$(k -n $ns get pods -l batch.kubernetes.io/job-name=elastic \
  -o jsonpath='{range .items[*]}{.metadata.annotations.muster\.dev/member}={.spec.nodeName} {end}')
stray=$(for p in $ran; do [[ " $given " == *" $p "* ]] || echo "$p"; done)
check "its 4 pods ran on the members its Group was given ($given)" test -z "$stray" -a "$(wc -w <<<"$ran")" -eq 4

# --- an elastic Indexed Job resized while it runs: grown from 4 to 6, then shrunk to 3 -------
queued_job_yaml stretch 4 indexed=1 | k -n $ns create -f - >/dev/null
eventually 30 "Job stretch runs its 4 pods" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l batch.kubernetes.io/job-name=stretch --field-selector=status.phase=Running -o name | wc -l) -eq 4 ]]"
k -n $ns patch job stretch --type merge -p '{"spec":{"parallelism":6,"completions":6}}' >/dev/null
pass "the Job was resized to 6 while it runs (the webhook allows a pod count change)"
eventually 30 "its Group grew to 6 members" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev stretch -o jsonpath='{.status.allocation[*].member}' | wc -w) -eq 6 ]]"
eventually 30 "its 6 pods run, each on the node of its member" on_assigned $ns stretch batch.kubernetes.io/job-name=stretch 6
k -n $ns patch job stretch --type merge -p '{"spec":{"parallelism":3,"completions":3}}' >/dev/null
eventually 30 "shrunk to 3, its Group releases the members of the deleted pods" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev stretch -o jsonpath='{.status.allocation[*].member}') == '0 1 2' ]]"
check "the 3 pods left run on their members" on_assigned $ns stretch batch.kubernetes.io/job-name=stretch 3
check "and the Group kept running throughout (phase $(group_phase $ns stretch), evicted $(k -n $ns get groups.muster.dev stretch -o jsonpath='{.status.requeue.count}') times)" \
  test "$(group_phase $ns stretch)/$(k -n $ns get groups.muster.dev stretch -o jsonpath='{.status.requeue.count}')" = Running/
