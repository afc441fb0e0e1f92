#!/usr/bin/env bash
# e2e: devices DRA drivers publish (resource.k8s.io/v1 ResourceSlices, written here as a driver
# writes them) reach muster's graph with their nodes: muster_published_devices counts the
# devices of two nodes' slices; a newer generation of a pool replaces the older; a slice for all
# nodes, which muster does not read yet, is counted as unread and adds nothing; deleting slices
# takes their devices away.
# Then claims: a DeviceClass for the driver, H100 slices on three nodes and A100s on a fourth;
# a pod of kube-scheduler's claims four H100s (kube-scheduler allocates them); a queued Job of two
# pods, each claiming eight H100s by a CEL selector through a ResourceClaimTemplate, is placed
# whole on the two H100 nodes kube-scheduler left whole; muster allocates each pod's claim
# (its devices, its node, reserved for the pod) before binding it; a checker reads every
# allocated claim: no device is given twice; when the Job is done the ResourceClaim controller
# deallocates and deletes its claims. A plain pod group's pods claim the same way.
# Then extended resources served by devices: a DeviceClass serves example.com/gpu, which no node
# has; kube-scheduler's pod asks four (kube-scheduler makes and allocates its claim); a queued Job
# of two pods asking eight each is placed whole beside it; muster makes each pod's claim (owned
# by the pod, eight devices of its node, reserved for it) and names it in the pod's status, no
# device is given twice, and the claims go with the pods.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-dra
echo "test-muster-dra" >&2
cleanup() {
  muster_down
  k delete resourceslices,deviceclasses -l e2e=muster-dra --ignore-not-found >/dev/null 2>&1 || true
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

# --- claims ---------------------------------------------------------------------------------
mapfile -t nodes < <(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | head -4)
(( ${#nodes[@]} == 4 )) || fail "the cluster has four nodes (run.sh gives it tenant-4x8.yaml)"
slice_yaml e2e-h0 "${nodes[0]}" 1 8 | k apply -f - >/dev/null
slice_yaml e2e-h1 "${nodes[1]}" 1 8 | k apply -f - >/dev/null
slice_yaml e2e-h2 "${nodes[2]}" 1 8 | k apply -f - >/dev/null
slice_yaml e2e-a3 "${nodes[3]}" 1 8 | sed 's/string: h100/string: a100/' | k apply -f - >/dev/null
eventually 30 "four nodes' slices: 32 devices placed" devices_counted 32
k apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: e2e-gpu, labels: {e2e: muster-dra}}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
YAML
# h100_template NAME COUNT: a ResourceClaimTemplate of COUNT H100s of class e2e-gpu
h100_template() {
  cat <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: $ns}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: e2e-gpu
          count: $2
          selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].model == "h100"'}}]
YAML
}
h100_template eight-h100 8 | k apply -f - >/dev/null
h100_template four-h100 4 | k apply -f - >/dev/null

# with_claim TEMPLATE: the object on stdin (a Pod or a Job) with its pod spec claiming TEMPLATE
with_claim() {
  python3 -c '
import sys, yaml
o = yaml.safe_load(sys.stdin)
spec = o["spec"]["template"]["spec"] if o["kind"] == "Job" else o["spec"]
spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": sys.argv[1]}]
spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
print(yaml.safe_dump(o))' "$1"
}
# kube-scheduler's pod, running for a while on one of the H100 nodes.
kwok_pod_yaml theirs 120 "app: theirs" | with_claim four-h100 | k -n $ns apply -f - >/dev/null
eventually 60 "kube-scheduler allocates its pod's claim and binds it" bash -c \
  "[[ -n \$('$K8S_BIN/kubectl' -n $ns get pod theirs -o jsonpath='{.spec.nodeName}') ]]"
taken=$(k -n $ns get pod theirs -o jsonpath='{.spec.nodeName}')
case " ${nodes[*]:0:3} " in *" $taken "*) pass "... on an H100 node ($taken)" ;; *) fail "kube-scheduler put its pod on $taken, not an H100 node" ;; esac

queued_job_yaml train 2 run=5 indexed=1 | with_claim eight-h100 | k -n $ns apply -f - >/dev/null
eventually 90 "the Job whose two pods claim eight H100s each runs whole" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l job-name=train -o jsonpath='{range .items[*]}{.spec.nodeName}{\"\\n\"}{end}' | grep -c .) == 2 ]]"
# claims_report: one line per allocated claim of the namespace: pod node devices... (from
# reservedFor and status.allocation), and every device allocated twice anywhere, as DUP lines.
claims_report() {
  k get resourceclaims -A -o json | python3 -c '
import json, sys
seen = {}
for c in json.load(sys.stdin)["items"]:
    a = (c.get("status") or {}).get("allocation")
    if not a:
        continue
    node = a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
    devices = ["%s/%s/%s" % (r["driver"], r["pool"], r["device"]) for r in a["devices"]["results"]]
    for d in devices:
        if d in seen:
            print("DUP", d, seen[d], c["metadata"]["name"])
        seen[d] = c["metadata"]["name"]
    pods = [r["name"] for r in (c["status"].get("reservedFor") or [])]
    print(c["metadata"]["namespace"], ",".join(pods), node, len(devices), " ".join(sorted(set(d.split("/")[1] for d in devices))))
'
}
report=$(claims_report)
check "no device is allocated twice (every allocated claim read)" bash -c "! grep -q '^DUP' <<<'$report'"
for p in $(k -n $ns get pods -l job-name=train -o jsonpath='{.items[*].metadata.name}'); do
  node=$(k -n $ns get pod "$p" -o jsonpath='{.spec.nodeName}')
  check "pod $p's claim: eight devices of its node $node, reserved for it" grep -q "^$ns $p $node 8 $node\$" <<<"$report"
  claim=$(k -n $ns get pod "$p" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
  check "... with the delete-protection finalizer" \
    bash -c "'$K8S_BIN/kubectl' -n $ns get resourceclaim '$claim' -o jsonpath='{.metadata.finalizers}' | grep -q resource.kubernetes.io/delete-protection"
  [[ $node != "$taken" && $node != "${nodes[3]}" ]] || fail "pod $p is on $node: kube-scheduler's node or the A100 node"
done
pass "the gang is on the two H100 nodes kube-scheduler left whole"
eventually 60 "the Job completes" job_complete $ns train
eventually 60 "its claims are deallocated and deleted by the ResourceClaim controller" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get resourceclaims -o jsonpath='{.items[*].metadata.name}' | grep -q train-"
# A plain pod group (no Job) claims the same way.
for i in 0 1; do
  kwok_pod_yaml plain-$i 5 'muster.dev/group: plain, muster.dev/group-size: "2", muster.dev/queue: default' |
    with_claim eight-h100 | k -n $ns apply -f - >/dev/null
done
eventually 90 "a plain group whose two pods claim eight H100s each runs whole" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l muster.dev/group=plain -o jsonpath='{range .items[*]}{.spec.nodeName}{\"\\n\"}{end}' | grep -c .) == 2 ]]"
report=$(claims_report)
check "no device is allocated twice (every allocated claim read)" bash -c "! grep -q '^DUP' <<<'$report'"
for p in plain-0 plain-1; do
  node=$(k -n $ns get pod "$p" -o jsonpath='{.spec.nodeName}')
  check "pod $p's claim: eight devices of its node $node, reserved for it" grep -q "^$ns $p $node 8 $node\$" <<<"$report"
done
eventually 60 "the plain group's pods complete, and their claims go" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get resourceclaims -o name | grep -q /plain-"
k -n $ns delete pod plain-0 plain-1 --wait=false >/dev/null
k -n $ns delete pod theirs --wait=false >/dev/null
eventually 60 "kube-scheduler's pod and its claim are gone" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get resourceclaims -o name | grep -q /theirs-"

# --- extended resources served by devices ---------------------------------------------------
# No node has example.com/gpu; class e2e-gpu-ext serves that name with the driver's GPUs.
k apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: e2e-gpu-ext, labels: {e2e: muster-dra}}
spec:
  extendedResourceName: example.com/gpu
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
YAML
# with_gpus N: the object on stdin (a Pod or a Job) with its container asking N example.com/gpu
with_gpus() {
  python3 -c '
import sys, yaml
o = yaml.safe_load(sys.stdin)
spec = o["spec"]["template"]["spec"] if o["kind"] == "Job" else o["spec"]
r = spec["containers"][0]["resources"]
r["requests"]["example.com/gpu"] = sys.argv[1]
r["limits"] = {"example.com/gpu": sys.argv[1]}
print(yaml.safe_dump(o))' "$1"
}
# kube-scheduler serves its pod's four through a claim it makes itself.
kwok_pod_yaml theirs-ext 120 "app: theirs" | with_gpus 4 | k -n $ns apply -f - >/dev/null
eventually 60 "kube-scheduler binds its pod asking four example.com/gpu, with a claim it made" bash -c \
  "[[ -n \$('$K8S_BIN/kubectl' -n $ns get pod theirs-ext -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}') ]]"
taken=$(k -n $ns get pod theirs-ext -o jsonpath='{.spec.nodeName}')
queued_job_yaml ext 2 run=5 indexed=1 | with_gpus 8 | k -n $ns apply -f - >/dev/null
check_workload_group $ns ext jobs.batch Job 2 "two members"
check "its Group asks eight devices per member in place of the count" test \
  "$(k -n $ns get groups.muster.dev ext -o jsonpath='{.spec.devices[0].count} {.spec.devices[0].extendedResource} {.spec.resources.example\.com/gpu}')" \
  = "8 example.com/gpu "
eventually 90 "the Job whose two pods ask eight example.com/gpu each runs whole" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l job-name=ext -o jsonpath='{range .items[*]}{.spec.nodeName}{\"\\n\"}{end}' | grep -c .) == 2 ]]"
report=$(claims_report)
check "no device is allocated twice (every allocated claim read)" bash -c "! grep -q '^DUP' <<<'$report'"
check "kube-scheduler's claim holds four devices of its node $taken" grep -q "^$ns theirs-ext $taken 4 $taken\$" <<<"$report"
for p in $(k -n $ns get pods -l job-name=ext -o jsonpath='{.items[*].metadata.name}'); do
  node=$(k -n $ns get pod "$p" -o jsonpath='{.spec.nodeName}')
  claim=$(k -n $ns get pod "$p" -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}')
  check "pod $p names the claim muster made for its extended resources ($claim)" test -n "$claim"
  check "... which holds eight devices of its node $node, reserved for it" grep -q "^$ns $p $node 8 $node\$" <<<"$report"
  check "... maps its container's example.com/gpu to the claim's request" test \
    "$(k -n $ns get pod "$p" -o jsonpath='{.status.extendedResourceClaimStatus.requestMappings[0].containerName}/{.status.extendedResourceClaimStatus.requestMappings[0].resourceName}')" \
    = main/example.com/gpu
  check "... and is owned by the pod" test \
    "$(k -n $ns get resourceclaim "$claim" -o jsonpath='{.metadata.ownerReferences[0].uid}')" = "$(k -n $ns get pod "$p" -o jsonpath='{.metadata.uid}')"
  [[ $node != "$taken" ]] || fail "pod $p is on $taken, where kube-scheduler's pod holds half the GPUs"
done
eventually 60 "the Job completes" job_complete $ns ext
k -n $ns delete job ext --cascade=foreground --wait=false >/dev/null
eventually 60 "with its pods gone, their claims go too" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get resourceclaims -o name | grep -q /ext-"
k -n $ns delete pod theirs-ext --wait=false >/dev/null
pass "published devices reach muster's graph with their nodes, and muster allocates its pods' claims"
