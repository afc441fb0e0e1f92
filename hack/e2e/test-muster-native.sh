#!/usr/bin/env bash
# e2e: Kubernetes' own PodGroup (scheduling.k8s.io/v1beta1, 1.37 with GenericWorkload) as a pod
# group muster gang-schedules. Pods that name a PodGroup in spec.schedulingGroup and carry the
# queue label, and nothing else of muster's, are held by the webhook (gate, schedulerName, group
# and size labels from the gang's minCount), placed and bound whole by muster on the nodes its
# Group assigns, and the PodGroup gets the condition kube-scheduler would set
# (PodGroupInitiallyScheduled=True); a pod beyond the gang's minCount joins it once it runs, as
# kube-scheduler schedules such pods. Refused: a pod naming a PodGroup that does not exist, one with
# a basic (not gang) policy, one whose group label disagrees, one with a preset nodeName. A pod
# naming a PodGroup without the queue label is left to kube-scheduler.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-native
echo "test-muster-native" >&2
muster_in_namespace $ns

# pod_group NAME POLICY: a standalone PodGroup (POLICY is its schedulingPolicy, as YAML flow)
pod_group() {
  k -n $ns apply -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: $1}
spec: {schedulingPolicy: $2}
YAML
}
# native_pod NAME GROUP RUN_SECONDS [LABELS] [SPEC-LINE]: a pod as a native gang user writes it
native_pod() {
  kwok_pod_yaml "$1" "$3" "${4-muster.dev/queue: default}"
  echo "  schedulingGroup: {podGroupName: $2}"
  [[ -z ${5:-} ]] || echo "  $5"
}

pod_group ring '{gang: {minCount: 3}}'
out=$(native_pod ring-0 ring 20 | k -n $ns create -f - -o jsonpath='{.metadata.labels.muster\.dev/group} {.metadata.labels.muster\.dev/group-size} {.spec.schedulingGates[*].name} {.spec.schedulerName}')
check "the pod joined group ring, sized by the gang's minCount, held for muster ($out)" \
  test "$out" = "ring 3 muster.dev/admission muster"
sleep 2
check "one pod of three is not placed" \
  test -z "$(k -n $ns get pod ring-0 -o jsonpath='{.spec.nodeName}')"
for i in 1 2; do native_pod ring-$i ring 20 | k -n $ns create -f - >/dev/null; done
runs_whole $ns ring muster.dev/group=ring 3
native_pod ring-3 ring 5 | k -n $ns create -f - >/dev/null
eventually 30 "a fourth pod, beyond the gang's minCount, joins it once it runs" bash -c \
  "[[ -n \$('$K8S_BIN/kubectl' -n $ns get pod ring-3 -o jsonpath='{.spec.nodeName}') ]]"
eventually 30 "the PodGroup says PodGroupInitiallyScheduled=True, reason Scheduled" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get podgroups.scheduling.k8s.io ring -o jsonpath='{.status.conditions[?(@.type==\"PodGroupInitiallyScheduled\")].status}/{.status.conditions[?(@.type==\"PodGroupInitiallyScheduled\")].reason}') == True/Scheduled ]]"
eventually 60 "the Group is Succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev ring -o jsonpath='{.status.phase}') == Succeeded ]]"

native_pod lost-0 lost 5 | refused "a pod naming a PodGroup that does not exist" \
  "spec.schedulingGroup.podGroupName: PodGroup $ns/lost (scheduling.k8s.io/v1beta1) does not exist" k -n $ns create -f -
pod_group solo '{basic: {}}'
native_pod solo-0 solo 5 | refused "a pod naming a PodGroup with a basic policy" \
  "PodGroup $ns/solo (scheduling.k8s.io) has no spec.schedulingPolicy.gang" k -n $ns create -f -
pod_group pair '{gang: {minCount: 2}}'
native_pod pair-x pair 5 'muster.dev/queue: default, muster.dev/group: other' | refused \
  "a pod whose group label is not its PodGroup" "\"other\" differs from \"pair\", the group of spec.schedulingGroup.podGroupName" \
  k -n $ns create -f -
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')
native_pod pair-n pair 5 'muster.dev/queue: default' "nodeName: $node" | refused \
  "a pod of the group that presets its node" "cannot choose its node" k -n $ns create -f -

out=$(native_pod free-0 pair 5 'app: free' | k -n $ns create -f - -o jsonpath='{.spec.schedulerName}/{.spec.schedulingGates}')
check "without the queue label the pod is kube-scheduler's, not held ($out)" test "$out" = "default-scheduler/"
