#!/usr/bin/env bash
# e2e: scheduler-plugins' PodGroup as a pod group's size, with `--accept-pod-group-alias`.
# Without the PodGroup CRD muster keeps working: an alias pod without a size is refused with the
# fix. With the CRD (scheduler-plugins' own, from its Go module by hack/third-party.sh): a pod
# naming a PodGroup that does not exist is refused with its name; pods labelled only
# scheduling.x-k8s.io/pod-group=ring, as coscheduling users write them, get their size from
# PodGroup ring's spec.minMember, and muster gates, places, binds and completes them as one
# group, a pod past minMember joining it once it runs; a pod whose own size disagrees with its
# PodGroup is refused. The CRD is removed after.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-podgroup
echo "test-muster-podgroup" >&2
crd=$("$hack_dir/third-party.sh" podgroup)
tmp=$(mktemp -d)
cleanup() {
  muster_down
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  k delete -f "$crd" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
k delete -f "$crd" --ignore-not-found --wait=true >/dev/null 2>&1 || true

# `muster install` and `muster controller` both take the flag; this wrapper adds it to every call
# muster.sh makes, so the webhook is registered for (and accepts) the alias label.
printf '#!/bin/sh\nexec "%s" "$@" --accept-pod-group-alias\n' "$MUSTER_BIN" > "$tmp/muster"
chmod +x "$tmp/muster"
MUSTER_BIN=$tmp/muster muster_up
log_from=$(( $(wc -l < "$muster_log") + 1 ))
fresh_namespace $ns

# alias_pod NAME GROUP RUN_SECONDS [EXTRA-LABELS]: a pod as coscheduling users write it
alias_pod() {
  kwok_pod_yaml "$1" "$3" "scheduling.x-k8s.io/pod-group: $2 ${4:-}"
}

alias_pod early-0 early 5 | refused "without the PodGroup CRD, an alias pod without a size" \
  "PodGroup $ns/early does not exist (or the PodGroup CRD, scheduling.x-k8s.io/v1alpha1, is not installed)" \
  k -n $ns create -f -
out=$(alias_pod sized-0 sized 1 ', muster.dev/group-size: "1"' | k -n $ns create -f - -o jsonpath='{.metadata.labels.muster\.dev/group}')
check "without the CRD, an alias pod with a size of its own is a group as before ($out)" test "$out" = sized
eventually 30 "and it runs to the end" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pod sized-0 -o jsonpath='{.status.phase}') == Succeeded ]]"

k apply -f "$crd" >/dev/null
eventually 60 "the CRD podgroups.scheduling.x-k8s.io is established" bash -c \
  "[[ \$('$K8S_BIN/kubectl' get crd podgroups.scheduling.x-k8s.io -o jsonpath='{.status.conditions[?(@.type==\"Established\")].status}' 2>/dev/null) == True ]]"
pass "scheduler-plugins' PodGroup CRD installed ($(basename "$crd"))"
alias_pod lost-0 lost 5 | refused "a pod naming a PodGroup that does not exist" \
  "PodGroup $ns/lost does not exist" k -n $ns create -f -

k -n $ns apply -f - >/dev/null <<YAML
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: ring}
spec: {minMember: 3, scheduleTimeoutSeconds: 60}
YAML
out=$(alias_pod ring-0 ring 20 | k -n $ns create -f - \
  -o jsonpath='{.metadata.labels.muster\.dev/group-size} {.metadata.labels.muster\.dev/queue} {.spec.schedulingGates[*].name} {.spec.schedulerName}')
check "the pod took its size from the PodGroup's minMember and was held for muster ($out)" \
  test "$out" = "3 default muster.dev/admission muster"
alias_pod ring-x ring 8 ', muster.dev/group-size: "2"' | refused "a pod whose own size disagrees with its PodGroup" \
  "\"2\" disagrees with spec.minMember 3 of PodGroup $ns/ring" k -n $ns create -f -
for i in 1 2; do alias_pod ring-$i ring 20 | k -n $ns create -f - >/dev/null; done
runs_whole $ns ring muster.dev/group=ring 3
# As coscheduling lets pods past minMember through once the gang is placed.
alias_pod ring-3 ring 5 | k -n $ns create -f - >/dev/null
eventually 30 "a fourth pod, beyond the PodGroup's minMember, joins the gang once it runs" bash -c \
  "[[ -n \$('$K8S_BIN/kubectl' -n $ns get pod ring-3 -o jsonpath='{.spec.nodeName}') ]]"
eventually 60 "the Group is Succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev ring -o jsonpath='{.status.phase}') == Succeeded ]]"
# The webhook polls discovery every 30 s and starts watching PodGroups once the CRD is served.
eventually 45 "the webhook started watching PodGroups once the CRD was installed" \
  bash -c "tail -n +$log_from '$muster_log' | grep -q 'the PodGroup CRD is installed; watching PodGroups'"
