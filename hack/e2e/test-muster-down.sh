#!/usr/bin/env bash
# e2e: a down muster stops only muster's work. muster is installed (its webhooks registered,
# failing closed) and killed (SIGKILL, as a crash), the registration left in place. In a
# namespace labelled muster.dev/managed=true:
#   1  a plain pod is created, and so are the pods of a Job without the queue label (made by
#      the Job controller): the webhook's match conditions do not send them
#   2  a queued Job (label muster.dev/queue) is refused, the message naming muster's webhook;
#      so are the pods muster acts on: one with a muster.dev/ label, one for muster's scheduler,
#      one with a preset node name
#   3  muster started again: the queued Job is taken for the queue (for muster's scheduler) and
#      runs
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-muster-down" >&2
ns=e2e-muster-down
muster_in_namespace $ns
k label namespace $ns muster.dev/managed=true >/dev/null

# plain_pod NAME [LABELS] [EXTRA SPEC LINE]: a bare pod for KWOK (LABELS: a YAML flow map's inside)
plain_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {${2:-}}
  annotations: {kwok.muster.dev/run-seconds: "1", e2e.muster.dev/test: "true"}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
${3:-}
  containers:
  - name: main
    image: kwok-fake
    resources:
      requests: {cpu: 10m, memory: 1Mi}
YAML
}
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')

# Registered and serving: a queued Job is taken.
queued_job_yaml held 1 run=1 | k -n $ns apply -f - >/dev/null
check "with muster up, a queued Job is taken for the queue (muster's scheduler)" \
  test "$(k -n $ns get job held -o jsonpath='{.spec.template.spec.schedulerName}')" = muster

muster_kill
pass "muster killed; its webhook registration stays, failing closed"
k get mutatingwebhookconfiguration,validatingwebhookconfiguration muster >/dev/null ||
  fail "the webhook registration is gone"

# 1. what is not muster's goes on
plain_pod plain | k -n $ns apply -f - >/dev/null || fail "a plain pod of the managed namespace was refused"
pass "a plain pod is created in the managed namespace"
job_yaml unqueued 2 run=1 | k -n $ns apply -f - >/dev/null
eventually 30 "the Job controller creates the pods of a Job without the queue label" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l job-name=unqueued -o name | wc -l) == 2 ]]"

# 2. what is muster's waits, failing closed
managed='failed calling webhook "managed-pods.validate.muster.dev"'
queued_job_yaml waits 1 | refused "a queued Job" 'failed calling webhook "jobs.mutate.muster.dev"' k -n $ns apply -f -
plain_pod grouped 'muster.dev/group: g, muster.dev/queue: default' |
  refused "a pod of a plain group" 'failed calling webhook "pods.mutate.muster.dev"' k -n $ns apply -f -
plain_pod keyed | sed 's|e2e.muster.dev/test|muster.dev/member|' |
  refused "a pod with one of muster's annotations" "$managed" k -n $ns apply -f -
plain_pod ours '' '  schedulerName: muster' | refused "a pod for muster's scheduler" "$managed" k -n $ns apply -f -
plain_pod pinned '' "  nodeName: $node" | refused "a pod with a preset node name" "$managed" k -n $ns apply -f -

# 3. muster back: the queued Job is taken
muster_start
queued_job_yaml waits 1 run=1 | k -n $ns apply -f - >/dev/null
check "with muster back, the queued Job is taken for the queue" \
  test "$(k -n $ns get job waits -o jsonpath='{.spec.template.spec.schedulerName}')" = muster
eventually 60 "and runs" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev waits -o jsonpath='{.status.phase}') =~ ^(Running|Succeeded)$ ]]"
