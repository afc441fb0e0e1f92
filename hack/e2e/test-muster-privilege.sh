#!/usr/bin/env bash
# e2e: what muster's own identity may do to pods, on the real apiserver. `muster install` applies
# the chart's RBAC and its ValidatingAdmissionPolicy muster-pod-writes (deploy/chart/templates/
# pod-policy.yaml); acting as muster's ServiceAccount (with its token from controller.kubeconfig
# for patches, impersonated for the rest), the test removes muster's
# scheduling gate with the very patch the controller sends, changes muster.dev/ labels and
# annotations, binds with muster's annotation, deletes a pod scheduled by muster and names the
# claim of its extended resources in its status; and is refused changing a pod's image, another
# label or annotation, another gate, binding with another annotation, deleting another
# scheduler's pod, and any other status write. The same changes made by the admin pass, so the
# refusals are the policy's. The trimmed RBAC is checked with `kubectl auth can-i`.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
resolve_muster_bin
ns=e2e-privilege
account=system:serviceaccount:muster-system:muster
echo "test-muster-privilege" >&2
tmp=$(mktemp -d)
cleanup() {
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# muster's identity, as the apiserver sees its token
quiet() { "$@" >/dev/null; }
km() { k --as=$account --as-group=system:serviceaccounts --as-group=system:serviceaccounts:muster-system \
  --as-group=system:authenticated "$@"; }
# mpatch POD PATCH-JSON [TYPE]: a patch of pod POD sent as muster sends it, with the token of
# muster's ServiceAccount and nothing before it (kubectl patch would first read the pod, which
# muster may not); prints the apiserver's answer, fails on a refusal
mpatch() {
  curl -sS --fail-with-body --cacert "$tmp/ca.crt" -H "Authorization: Bearer $token" -X PATCH \
    -H "Content-Type: application/${3:-strategic-merge-patch}+json" --data "$2" "$server/api/v1/namespaces/$ns/pods/$1"
}
# pod NAME SCHEDULER GATES-JSON [RESOURCES-JSON]: a pod with labels app=demo and
# muster.dev/group=g, annotation note=kept, the given scheduler and scheduling gates, and a
# container asking 10m cpu (or RESOURCES)
pod() {
  local resources='{"requests": {"cpu": "10m"}}'
  [[ $# -ge 4 ]] && resources=$4
  cat <<JSON
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1", "labels": {"app": "demo", "muster.dev/group": "g"}, "annotations": {"note": "kept"}},
 "spec": {"schedulerName": "$2", "schedulingGates": $3, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
          "containers": [{"name": "main", "image": "kwok-fake", "resources": $resources}]}}
JSON
}
# binding POD NODE ANNOTATIONS-JSON: a Binding as the controller sends it
binding() {
  printf '{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "%s", "annotations": %s}, "target": {"apiVersion": "v1", "kind": "Node", "name": "%s"}}' \
    "$1" "$3" "$2" >"$tmp/binding.json"
}
gates() { k -n $ns get pod "$1" -o jsonpath='{.spec.schedulingGates[*].name}'; }
label() { k -n $ns get pod "$1" -o jsonpath="{.metadata.labels.${2//./\\.}}"; }

# muster's RBAC, its policy and nothing else of it: no webhook registration, no controller.
"$MUSTER_BIN" install --out "$tmp/muster" --webhook-url https://127.0.0.1:9 >/dev/null
k delete mutatingwebhookconfiguration,validatingwebhookconfiguration muster --ignore-not-found >/dev/null
kubeconfig=$tmp/muster/controller.kubeconfig
server=$(k --kubeconfig "$kubeconfig" config view --raw -o jsonpath='{.clusters[0].cluster.server}')
token=$(k --kubeconfig "$kubeconfig" config view --raw -o jsonpath='{.users[0].user.token}')
k --kubeconfig "$kubeconfig" config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
  base64 -d >"$tmp/ca.crt"
check "the policy muster-pod-writes and its binding are installed" \
  k get validatingadmissionpolicy,validatingadmissionpolicybinding muster-pod-writes -o name
fresh_namespace $ns
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')

# 1. RBAC: the verbs muster's code calls, no more
can() { [[ $(k auth can-i "$@" --as=$account 2>/dev/null) == yes ]]; }
cannot() { [[ $(k auth can-i "$@" --as=$account 2>/dev/null) == no ]]; }
for allowed in "patch pods" "delete pods" "create pods --subresource=binding" "list pods" "patch jobs.batch" \
  "patch pods --subresource=status" "create resourceclaims.resource.k8s.io" \
  "create groups.muster.dev" "patch queues.muster.dev --subresource=status" "create events.events.k8s.io" \
  "list reservations.muster.dev" "patch reservations.muster.dev --subresource=status" "watch cohorts.muster.dev" \
  "patch cohorts.muster.dev --subresource=status" "update leases/muster-controller -n muster-system"; do
  # shellcheck disable=SC2086 # verb, resource and flags
  check "muster may $allowed" can $allowed
done
for denied in "create pods" "get pods" "update pods" "delete resourceclaims.resource.k8s.io" "update jobs.batch" \
  "get jobs.batch" "update jobs.batch --subresource=finalizers" "update groups.muster.dev" \
  "update queues.muster.dev --subresource=status" "create reservations.muster.dev" "patch reservations.muster.dev" \
  "create cohorts.muster.dev" "patch cohorts.muster.dev" "list secrets -n muster-system" "create secrets -n muster-system" \
  "list leases -n muster-system" "update leases/other -n muster-system" "create pods --subresource=eviction"; do
  # shellcheck disable=SC2086
  check "muster may not $denied" cannot $denied
done

# 2. pod writes: a gated pod of muster's, another gate beside muster's
pod gated muster '[{"name": "muster.dev/admission"}, {"name": "example.com/other"}]' | k -n $ns create -f - >/dev/null
# The apiserver takes a moment to load a new policy.
image_refused() {
  local out
  out=$(mpatch gated '{"spec":{"containers":[{"name":"main","image":"evil"}]}}' 2>&1) && return 1
  grep -q "muster may change no pod spec field but its scheduling gate" <<<"$out"
}
eventually 30 "the policy is in force" image_refused
refused "muster changing a pod's image" "muster may change no pod spec field but its scheduling gate" \
  mpatch gated '{"spec":{"containers":[{"name":"main","image":"evil"}]}}'
refused "muster adding a toleration" "muster may change no pod spec field" \
  mpatch gated '[{"op":"add","path":"/spec/tolerations/-","value":{"key":"example.com/any","operator":"Exists"}}]' json-patch
refused "muster changing another label" "muster may change only muster.dev/ labels of a pod" \
  mpatch gated '{"metadata":{"labels":{"app":"other"}}}'
refused "muster adding another label" "muster may change only muster.dev/ labels of a pod" \
  mpatch gated '{"metadata":{"labels":{"role":"admin"}}}'
refused "muster removing another annotation" "muster may change only muster.dev/ annotations of a pod" \
  mpatch gated '{"metadata":{"annotations":{"note":null}}}'
refused "muster removing another scheduler's gate" "muster may remove its own scheduling gate" \
  mpatch gated '{"spec":{"schedulingGates":[{"$patch":"delete","name":"example.com/other"}]}}'
refused "muster adding a finalizer" "muster may not change a pod's owners or finalizers" \
  mpatch gated '{"metadata":{"finalizers":["example.com/keep"]}}' merge-patch
check "muster may set its own labels and annotations" \
  quiet mpatch gated '{"metadata":{"labels":{"muster.dev/member":"0","muster.dev/group":"g2"},"annotations":{"muster.dev/note":"x"}}}'
check "... and they are set" test "$(label gated muster.dev/member)/$(label gated muster.dev/group)" = 0/g2
# The controller's own patch (executor.rs remove_gate): strategic merge with the pod's uid.
uid=$(k -n $ns get pod gated -o jsonpath='{.metadata.uid}')
check "muster may remove its scheduling gate (the controller's patch)" quiet mpatch gated \
  "{\"metadata\":{\"uid\":\"$uid\"},\"spec\":{\"schedulingGates\":[{\"\$patch\":\"delete\",\"name\":\"muster.dev/admission\"}]}}"
check "... and only its gate went" test "$(gates gated)" = example.com/other
check "the admin may still change the image (the refusal was the policy's, not the apiserver's)" \
  quiet k -n $ns patch pod gated -p '{"spec":{"containers":[{"name":"main","image":"kwok-other"}]}}'

# 3. bindings: their annotations land on the pod
pod ready muster '[]' | k -n $ns create -f - >/dev/null
binding ready "$node" '{"example.com/owner": "evil"}'
refused "muster binding with another annotation" "muster binds with muster.dev/ annotations only" \
  km create --raw "/api/v1/namespaces/$ns/pods/ready/binding" -f "$tmp/binding.json"
binding ready "$node" '{"muster.dev/member": "0"}'
check "muster may bind with its member annotation" \
  quiet km create --raw "/api/v1/namespaces/$ns/pods/ready/binding" -f "$tmp/binding.json"
check "... and the pod is bound" test "$(k -n $ns get pod ready -o jsonpath='{.spec.nodeName}')" = "$node"

# 4. deletions: muster's pods only
pod other default-scheduler '[]' | k -n $ns create -f - >/dev/null
refused "muster deleting another scheduler's pod" "muster may delete only pods scheduled by muster" \
  km delete --raw "/api/v1/namespaces/$ns/pods/other"
check "muster may delete a pod it schedules" quiet km delete --raw "/api/v1/namespaces/$ns/pods/gated"
# 5. pod status: the claim muster made for the extended resources of a pod it schedules, once
gpus='{"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}'
pod gpus muster '[]' "$gpus" | k -n $ns create -f - >/dev/null
pod foreign default-scheduler '[]' "$gpus" | k -n $ns create -f - >/dev/null
claimed() {
  printf '{"status": {"extendedResourceClaimStatus": {"resourceClaimName": "%s", "requestMappings": [{"containerName": "main", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}]}}}' "$1"
}
refused "muster naming a claim in another scheduler's pod's status" "in a pod's status muster may set only" \
  mpatch foreign/status "$(claimed foreign-extended-resources-x7k2p)" merge-patch
refused "muster changing a pod's phase" "in a pod's status muster may set only" \
  mpatch gpus/status '{"status": {"phase": "Failed"}}' merge-patch
check "muster may name the claim of its pod's extended resources" \
  quiet mpatch gpus/status "$(claimed gpus-extended-resources-x7k2p)" merge-patch
refused "... once" "in a pod's status muster may set only" \
  mpatch gpus/status "$(claimed gpus-extended-resources-other)" merge-patch
pass "muster's identity is held to its own changes"
