#!/usr/bin/env bash
# e2e: a shrinkable elastic Job gives back pods so that the first Job in line starts now. The
# trainer (elastic from 50 to 100 whole-node pods, muster.dev/shrinkable) fills the worker nodes
# for 10 minutes; a 20-pod Job that runs 5 s comes. Once that Job is owed its reservation, muster
# deletes 20 of the trainer's pods, binds the Job's pods on their nodes only once they are gone,
# and the trainer keeps running, then grows back to 100 when the Job is done.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-shrink
echo "test-muster-shrink" >&2
muster_in_namespace $ns

# The pods muster deletes count as failures to the Job controller: a shrinkable Job allows some,
# per index, so that a deleted index's pod is made again after its own backoff (10 s), not the
# whole Job's (which doubles with every failure, up to 6 min).
queued_job_yaml trainer 100 cpu=60 run=600 indexed=1 |
  sed -e 's/^metadata:/metadata:\n  annotations: {muster.dev\/min-members: "50", muster.dev\/duration-seconds: "600", muster.dev\/shrinkable: "true"}/' \
    -e 's/^  backoffLimit: 0/  backoffLimitPerIndex: 3/' |
  k -n $ns create -f - >/dev/null
eventually 60 "the trainer runs on every worker node" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l job-name=trainer --field-selector=status.phase=Running -o name | wc -l) -eq 100 ]]"
queued_job_yaml eval 20 cpu=60 run=5 |
  sed -e 's/^metadata:/metadata:\n  annotations: {muster.dev\/duration-seconds: "5"}/' |
  k -n $ns create -f - >/dev/null
# Sampled until eval's pods are all bound: no node ever holds a trainer pod and an eval pod at once
# (one 60-cpu pod fits a 100-cpu node).
overlap=0
deadline=$(( $(date +%s) + 90 ))
while :; do
  snap=$(pod_snapshot $ns)
  both=$(awk -F: '$2!="" && $3!="Succeeded" && $3!="Failed" {print $1, $2}' <<<"$snap" |
    awk '{jobs[$2] = jobs[$2] " " $1} END {for (n in jobs) if (jobs[n] ~ /trainer/ && jobs[n] ~ /eval/) print n}')
  if [[ -n $both ]]; then overlap=1; echo "  ..   a trainer pod and an eval pod on $both" >&2; fi
  (( $(awk -F: '$1=="eval" && $2!=""' <<<"$snap" | wc -l) < 20 )) || break
  (( $(date +%s) < deadline )) || fail "eval's pods not all bound within 90 s"
  sleep 0.5
done
check "no node held a trainer pod and an eval pod at once" test $overlap -eq 0
check "muster said on the trainer that it gives way" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get events --field-selector involvedObject.name=trainer -o jsonpath='{.items[*].reason}' | grep -qw GivingWay"
runs_whole $ns eval job-name=eval 20
eventually 60 "eval completes" job_complete $ns eval
check "the trainer kept running ($(group_phase $ns trainer)), never evicted" test \
  "$(group_phase $ns trainer)/$(k -n $ns get groups.muster.dev trainer -o jsonpath='{.status.requeue.count}')" = Running/
eventually 60 "the trainer grows back to 100 members" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev trainer -o jsonpath='{.status.allocation[*].member}' | wc -w) -eq 100 ]]"
eventually 60 "its 100 pods run, each on the node of its member" on_assigned $ns trainer job-name=trainer 100
check "the trainer Job has not failed ($(k -n $ns get job trainer -o jsonpath='{.status.failed}') pods counted failed, indexes $(k -n $ns get job trainer -o jsonpath='{.status.failedIndexes}'))" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get job trainer -o jsonpath='{.status.conditions[*].type}' | grep -qw Failed"
# The trainer would run 10 minutes: its pods must be gone before the next test needs the nodes.
k -n $ns delete job trainer >/dev/null
eventually 60 "the trainer's pods are gone once it is deleted" bash -c \
  "[[ -z \$('$K8S_BIN/kubectl' -n $ns get pods -l job-name=trainer -o name) ]]"
