#!/usr/bin/env bash
# e2e: the checked-in CRDs (deploy/crds.yaml, generated from crates/muster-k8s) on the real
# apiserver: they are accepted and become Established; a Queue and a Group created by
# server-side apply read back as written; the Group's status subresource and printer columns
# work; objects the schema forbids are refused with a message naming the field.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-crds
echo "test-crds" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

k apply --server-side --field-manager=muster-e2e -f "$repo_dir/deploy/crds.yaml" >/dev/null
check "the CRDs become Established" k wait --for=condition=Established --timeout=60s \
  crd/queues.muster.dev crd/groups.muster.dev >/dev/null
# Discovery lags a moment behind Established.
served() { k get queues.muster.dev,groups.muster.dev -A >/dev/null 2>&1; }
eventually 30 "the resources are served" served

k delete queues.muster.dev $ns --ignore-not-found >/dev/null
fresh_namespace $ns
cat <<YAML | k apply --server-side --field-manager=muster-e2e -f - >/dev/null
apiVersion: muster.dev/v1alpha1
kind: Queue
metadata:
  name: $ns
spec:
  cohort: research
  policy: {kind: conservative, depth: 4}
  fairShareWeight: 2
  quotas:
    cpu: {nominal: 64, borrowingLimit: "32", lendingLimit: 500m}
    memory: {nominal: 256Gi}
  namespaceSelector:
    matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [$ns]}]
  readiness: {timeoutSeconds: 600, backoffLimit: 3, requeueOrder: Creation}
  preemption: {withinQueue: LowerPriority, reclaimWithinCohort: true}
---
apiVersion: muster.dev/v1alpha1
kind: Group
metadata:
  name: train
  namespace: $ns
spec:
  queue: $ns
  members: {min: 4, max: 8}
  resources: {cpu: 2, memory: 4Gi}
  nodeSelector: {pool: batch}
  affinity: [{matchExpressions: [{key: zone, operator: In, values: [a, b]}]}]
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
  topology: {level: rack, mode: required}
  priorityClassName: high
  durationSeconds: 600
  owner: {apiVersion: batch/v1, kind: Job, name: train}
YAML
pass "a Queue and a Group are created by server-side apply"
get() { k -n $ns get "$1" -o jsonpath="{$2}"; }
check "the Queue reads back (policy, int and string quantities)" \
  test "$(get queue/$ns .spec.policy.depth) $(get queue/$ns .spec.quotas.cpu.nominal) $(get queue/$ns .spec.quotas.memory.nominal)" = "4 64 256Gi"
check "the Group reads back (members, resources, affinity)" \
  test "$(get group/train .spec.members.min)/$(get group/train .spec.members.max) $(get group/train .spec.resources.memory) $(get group/train '.spec.affinity[0].matchExpressions[0].values[1]')" = "4/8 4Gi b"
k get queues -o wide >"$tmp/queues"
check "Queue printer columns: POLICY and COHORT" grep -qE "^$ns +conservative +research " "$tmp/queues"

# Status goes through the status subresource only.
k -n $ns patch group train --subresource=status --type=merge -p '{"status": {
  "phase": "Reserved", "observedGeneration": 1, "estimatedStart": "2020-01-02T03:04:05Z",
  "conditions": [{"type": "Queued", "status": "True", "reason": "Reserved", "message": "start reserved",
                  "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
  "requeue": {"count": 1}, "allocation": [{"member": 0, "node": "node-1"}]}}' >/dev/null
check "status patched through the status subresource" \
  test "$(get group/train .status.phase) $(get group/train '.status.conditions[0].type') $(get group/train '.status.allocation[0].node')" = "Reserved Queued node-1"
k -n $ns patch group train --type=merge -p '{"status": {"phase": "Running"}}' >/dev/null
check "status written through the main resource is ignored" test "$(get group/train .status.phase)" = Reserved
k -n $ns patch queue $ns --subresource=status --type=merge -p '{"status": {"observedGeneration": 1}}' >/dev/null
check "the Queue has a status subresource too" test "$(get queue/$ns .status.observedGeneration)" = 1
k -n $ns get groups >"$tmp/groups"
check "Group printer columns: header" grep -qE "^NAME +QUEUE +MIN +MAX +PHASE +POSITION +ESTIMATED START +AGE$" "$tmp/groups"
check "Group printer columns: values" grep -qE "^train +$ns +4 +8 +Reserved +[0-9]+y" "$tmp/groups"
check "both kinds are in the muster category" test "$(k -n $ns get muster -o name | sort | tr '\n' ' ')" = "group.muster.dev/train queue.muster.dev/$ns "

# refused NAME FIELD SPEC [KIND]: applying the Group (or KIND) "bad-NAME" with SPEC is refused by the apiserver's schema validation with a message naming FIELD.
refused() {
  local name=$1 field=$2 kind=${4:-Group} meta
  meta="\"name\": \"bad-$name\""
  [[ $kind == Group ]] && meta+=", \"namespace\": \"$ns\""
  local doc="{\"apiVersion\": \"muster.dev/v1alpha1\", \"kind\": \"$kind\", \"metadata\": {$meta}, \"spec\": $3}"
  if k apply --server-side --field-manager=muster-e2e -f - <<<"$doc" >"$tmp/out" 2>&1; then
    fail "$kind with $name was accepted"
  fi
  grep -qF "$field" "$tmp/out" || fail "$kind with $name: refused, but the message does not name $field: $(cat "$tmp/out")"
  pass "$kind with $name refused, naming $field"
}
refused negative-min spec.members.min '{"queue": "q", "members": {"min": -1}}'
refused zero-min spec.members.min '{"queue": "q", "members": {"min": 0}}'
refused no-members spec.members '{"queue": "q"}'
refused bad-quantity spec.resources.cpu '{"queue": "q", "members": {"min": 1}, "resources": {"cpu": "lots"}}'
refused bad-mode spec.topology.mode '{"queue": "q", "members": {"min": 1}, "topology": {"level": "rack", "mode": "sometimes"}}'
refused bad-operator 'spec.affinity[0].matchExpressions[0].operator' '{"queue": "q", "members": {"min": 1}, "affinity": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}'
refused bad-policy spec.policy.kind '{"policy": {"kind": "fifo"}}' Queue
refused zero-depth spec.policy.depth '{"policy": {"kind": "conservative", "depth": 0}}' Queue
refused negative-backoff spec.readiness.backoffBaseSeconds '{"readiness": {"backoffBaseSeconds": -1}}' Queue
if k -n $ns patch group train --subresource=status --type=merge -p '{"status": {"phase": "Sleeping"}}' >"$tmp/out" 2>&1; then
  fail "status phase Sleeping was accepted"
fi
check "an unknown status phase is refused, naming status.phase" grep -q "status.phase" "$tmp/out"
check "nothing refused was stored" test -z "$(k get groups.muster.dev,queues.muster.dev -A -o name | grep bad- || true)"

k delete queues.muster.dev $ns --wait=false >/dev/null
k delete namespace $ns --wait=false >/dev/null
