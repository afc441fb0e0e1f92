#!/usr/bin/env bash
# e2e: shapes of the Job API under muster. A Job whose completions exceed its parallelism is a
# group of `parallelism` members; its later pods take the members its finished pods leave, on the
# same nodes, and the Job completes. The same for an Indexed Job (completion indexes past the
# members). (Raising parallelism past completions while a Job runs: test-admission.sh.)
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
