#!/usr/bin/env bash
# e2e: failure shapes of the Job API under muster, with pods that really fail (KWOK's
# kwok.muster.dev/fail-index stage). An Indexed Job with backoffLimitPerIndex and
# podReplacementPolicy: Failed retries its failing index on the member the failed pod left, runs
# its other indexes, and ends Failed with that index; its Group is Failed. A Job whose
# podFailurePolicy fails it on exit code 1 ends at the first failure, its other pods are stopped,
# and its Group is Failed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-job-failures
echo "test-muster-job-failures" >&2
muster_in_namespace $ns

# failing_job NAME COMPLETIONS PARALLELISM FAIL_INDEX SPEC_EXTRA: an Indexed Job whose index
# FAIL_INDEX fails after 3 s, every time; the others succeed after 3 s
failing_job() {
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  labels: {muster.dev/queue: default}
spec:
  completions: $2
  parallelism: $3
  completionMode: Indexed
  podReplacementPolicy: Failed
$5
  template:
    metadata:
      annotations: {kwok.muster.dev/run-seconds: "3", kwok.muster.dev/fail-index: "$4", e2e.muster.dev/test: "true"}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers:
      - name: main
        image: kwok-fake
        resources:
          requests: {cpu: 10m, memory: 1Mi}
YAML
}
job_field() { k -n $ns get job "$1" -o jsonpath="$2" 2>/dev/null; }
failed_with() { # failed_with JOB REASON
  [[ $(job_field "$1" '{.status.conditions[?(@.type=="Failed")].status}/{.status.conditions[?(@.type=="Failed")].reason}') == "True/$2" ]]
}

# --- backoffLimitPerIndex: the failing index is retried once, on its member -----------------
failing_job per-index 4 2 1 "  backoffLimitPerIndex: 1
  maxFailedIndexes: 1" | k -n $ns create -f - >/dev/null
eventually 30 "Job per-index is placed as 2 members" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev per-index -o jsonpath='{.spec.members.min} {.status.allocation[*].member}') == '2 0 1' ]]"
placed=$(k -n $ns get groups.muster.dev per-index -o jsonpath='{range .status.allocation[*]}{.member}={.node} {end}')
eventually 90 "Job per-index ends Failed because of its failed index (FailedIndexes)" failed_with per-index FailedIndexes
check "index 1 failed, the 3 others succeeded ($(job_field per-index '{.status.failedIndexes} {.status.succeeded}'))" \
  test "$(job_field per-index '{.status.failedIndexes} {.status.succeeded}')" = "1 3"
index1=$(k -n $ns get pods -l batch.kubernetes.io/job-name=per-index,batch.kubernetes.io/job-completion-index=1 \
  -o jsonpath='{range .items[*]}{.status.phase}:{.metadata.annotations.muster\.dev/member} {end}')
check "index 1 ran twice (its retry), both times on member 1 ($index1)" test "$index1" = "Failed:1 Failed:1 "
ran=$(k -n $ns get pods -l batch.kubernetes.io/job-name=per-index \
  -o jsonpath='{range .items[*]}{.metadata.annotations.muster\.dev/member}={.spec.nodeName} {end}')
stray=$(for p in $ran; do [[ " $placed " == *" $p "* ]] || echo "$p"; done)
check "each of its $(wc -w <<<"$ran") pods ran on a member its Group was given ($placed)" \
  test -z "$stray" -a "$(wc -w <<<"$ran")" -eq 5
eventually 30 "its Group is Failed" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev per-index -o jsonpath='{.status.phase}') == Failed ]]"

# --- podFailurePolicy: FailJob on exit code 1 ends the Job, and its Group gives its nodes back
failing_job fail-fast 3 3 0 "  backoffLimit: 6
  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes: {operator: In, values: [1]}" | k -n $ns create -f - >/dev/null
eventually 60 "Job fail-fast ends Failed at its first failure (PodFailurePolicy)" failed_with fail-fast PodFailurePolicy
check "no pod of fail-fast was retried ($(k -n $ns get pods -l batch.kubernetes.io/job-name=fail-fast -o name | wc -l) pods)" \
  test "$(k -n $ns get pods -l batch.kubernetes.io/job-name=fail-fast -o name | wc -l)" -le 3
eventually 30 "its Group is Failed" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev fail-fast -o jsonpath='{.status.phase}') == Failed ]]"
eventually 60 "the pods of both Jobs are gone from their nodes" bash -c \
  "[[ -z \$('$K8S_BIN/kubectl' -n $ns get pods -o jsonpath='{range .items[?(@.status.phase==\"Running\")]}{.metadata.name} {end}') ]]"
