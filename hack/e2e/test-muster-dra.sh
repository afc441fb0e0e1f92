#!/usr/bin/env bash
# e2e: devices DRA drivers publish (resource.k8s.io/v1 ResourceSlices, written here as a driver
# writes them) reach muster's graph with their nodes: muster_published_devices counts the
# devices of two nodes' slices; a newer generation of a pool replaces the older; a slice for all
# nodes, which muster does not read yet, is counted as unread and adds nothing; deleting slices
# takes their devices away. A pod claiming devices is still refused by the webhook, naming the
# field, since muster does not allocate claims yet.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-dra
echo "test-muster-dra" >&2
cleanup() {
  muster_down
  k delete resourceslices -l e2e=muster-dra --ignore-not-found >/dev/null 2>&1 || true
}
trap cleanup EXIT
muster_up
fresh_namespace $ns

mapfile -t nodes < <(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | head -2)
(( ${#nodes[@]} == 2 )) || fail "the cluster has two nodes"

# slice_yaml NAME NODE GENERATION COUNT: COUNT GPUs of driver gpu.example.com in pool NODE
slice_yaml() {
  local name=$1 node=$2 generation=$3 count=$4 i
  printf 'apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: %s, labels: {e2e: muster-dra}}\n' "$name"
  printf 'spec:\n  driver: gpu.example.com\n  nodeName: %s\n' "$node"
  printf '  pool: {name: %s, generation: %s, resourceSliceCount: 1}\n  devices:\n' "$node" "$generation"
  for ((i = 0; i < count; i++)); do
    printf '  - name: gpu-%s\n    attributes: {model: {string: h100}, index: {int: %s}}\n' "$i" "$i"
    printf '    capacity: {memory: {value: 80Gi}}\n'
  done
}
devices_counted() { [[ $(muster_metric 'muster_published_devices{driver="gpu.example.com"}') == "$1" ]]; }
unread_counted() { [[ $(muster_metric muster_unread_resource_slices) == "$1" ]]; }

slice_yaml e2e-a "${nodes[0]}" 1 8 | k apply -f - >/dev/null
slice_yaml e2e-b "${nodes[1]}" 1 8 | k apply -f - >/dev/null
eventually 30 "two nodes' slices of eight GPUs: 16 devices placed" devices_counted 16
slice_yaml e2e-b2 "${nodes[1]}" 2 4 | k apply -f - >/dev/null
eventually 30 "a newer generation of one pool (4 GPUs) replaces the older: 12" devices_counted 12
printf 'apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: e2e-all, labels: {e2e: muster-dra}}\nspec:\n  driver: nic.example.com\n  allNodes: true\n  pool: {name: shared, generation: 1, resourceSliceCount: 1}\n  devices: [{name: nic-0}]\n' |
  k apply -f - >/dev/null
eventually 30 "a slice for all nodes is not read yet: counted as unread" unread_counted 1
check "... and adds no device" devices_counted 12
k delete resourceslice e2e-b2 e2e-all >/dev/null
eventually 30 "with the newer slice deleted, the older generation counts again: 16" devices_counted 16
k delete resourceslice e2e-a e2e-b >/dev/null
eventually 30 "with every slice deleted, nothing is placed" bash -c \
  "v=\$(curl -s --max-time 5 http://127.0.0.1:$(cat "$muster_dir/metrics-port")/metrics | awk '\$1 ~ /^muster_published_devices/ {s += \$2} END {print s + 0}'); [[ \$v == 0 ]]"

claim_pod=$(kwok_pod_yaml claimer 5 "muster.dev/group: dra, muster.dev/group-size: \"1\", muster.dev/queue: default" |
  python3 -c 'import sys, yaml; p = yaml.safe_load(sys.stdin); p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "eight-h100"}]; print(yaml.safe_dump(p))')
refused "a pod claiming devices" "spec.resourceClaims" bash -c "printf '%s' \"\$1\" | '$K8S_BIN/kubectl' -n $ns apply -f -" _ "$claim_pod"
pass "published devices reach muster's graph with their nodes"
