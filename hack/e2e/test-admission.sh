#!/usr/bin/env bash
# e2e: muster's admission webhook on the real apiserver. `muster install` registers it (and is
# idempotent), `muster webhook` serves it under the muster ServiceAccount's own identity, and a
# hostile tenant (kubectl --as=tenant, with edit rights in one namespace) meets every refusal
# with its message. A queued Job is held (suspend, schedulerName muster), a group pod is gated,
# and a pod without muster labels in an unmanaged namespace runs as if muster were not there.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
resolve_muster_bin
ns=e2e-admission
plain_ns=e2e-admission-plain
queue=e2e-admission
echo "test-admission" >&2
tmp=$(mktemp -d)
pid=""
cleanup() {
  local rc=$?
  # The registration fails closed: it must not outlive the webhook.
  k delete mutatingwebhookconfiguration muster --ignore-not-found >/dev/null 2>&1 || true
  k delete validatingwebhookconfiguration muster --ignore-not-found >/dev/null 2>&1 || true
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  if (( rc != 0 )) && [[ -f $tmp/webhook.log ]]; then echo "--- webhook log (tail)" >&2; tail -n 30 "$tmp/webhook.log" >&2; fi
  k delete queues.muster.dev $queue $queue-elsewhere --ignore-not-found --wait=false >/dev/null 2>&1 || true
  k delete clusterrole e2e-admission-groups --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

m() { "$MUSTER_BIN" "$@"; }
kt() { k --as=tenant --as-group=system:authenticated "$@"; }          # the hostile tenant
km() { k --kubeconfig "$tmp/muster/controller.kubeconfig" "$@"; }     # muster's own identity
# mpatch PATH JSON: a merge patch of the object at API path PATH with muster's own token, as the
# controller sends it (kubectl patch and annotate first read the object, which muster may not)
mpatch() {
  local kc=$tmp/muster/controller.kubeconfig
  curl -sS --fail-with-body -X PATCH -H "Content-Type: application/merge-patch+json" --data "$2" \
    --cacert <(k --kubeconfig "$kc" config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d) \
    -H "Authorization: Bearer $(k --kubeconfig "$kc" config view --raw -o jsonpath='{.users[0].user.token}')" \
    "$(k --kubeconfig "$kc" config view --raw -o jsonpath='{.clusters[0].cluster.server}')$1"
}
# qjob NAME PODS QUEUE [CPU] [METADATA-YAML-LINES]: a Job in a queue, as a tenant writes it
qjob() {
  local name=$1 pods=$2 q=$3 cpu=${4:-100m} extra=${5:-}
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
  labels:
    muster.dev/queue: "$q"
$extra
spec:
  parallelism: $pods
  completions: $pods
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers:
      - name: main
        image: kwok-fake
        resources:
          requests: {cpu: "$cpu", memory: 10Mi}
YAML
}
# gpod NAME LABELS-JSON [SPEC-EXTRA-JSON]: a pod as JSON
gpod() {
  cat <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "labels": $2},
 "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "kwok-fake",
          "resources": {"requests": {"cpu": "100m", "memory": "10Mi"}}}]${3:+, $3}}}
JSON
}

# --- install refuses, applying nothing, while an earlier uninstall is under way --------------
# A ConfigMap with a finalizer holds muster-system in Terminating, as pods on a node that is gone do.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
release_hold() {
  k -n muster-system patch configmap e2e-hold --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
}
trap 'release_hold; cleanup' EXIT
k delete mutatingwebhookconfiguration,validatingwebhookconfiguration muster --ignore-not-found >/dev/null
k get namespace muster-system >/dev/null 2>&1 || k create namespace muster-system >/dev/null
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: e2e-hold, namespace: muster-system, finalizers: [e2e.muster.dev/hold]}\n' |
  k apply -f - >/dev/null
k delete namespace muster-system --wait=false >/dev/null
refused "muster install into a muster-system namespace being deleted" \
  "namespace/muster-system is being deleted, and nothing can be created in it: wait until it is gone" \
  m install --out "$tmp/muster" --webhook-url "https://127.0.0.1:$port"
check "the refused install registered no webhook" \
  bash -c '! "$1" get mutatingwebhookconfiguration muster >/dev/null 2>&1' _ "$K8S_BIN/kubectl"
release_hold
eventually 60 "muster-system is gone once its last object is" \
  bash -c '! "$1" get namespace muster-system >/dev/null 2>&1' _ "$K8S_BIN/kubectl"

# --- install (twice: the second run changes nothing) -------------------------------------
m install --out "$tmp/muster" --webhook-url "https://127.0.0.1:$port" >"$tmp/install1"
for line in "customresourcedefinition.apiextensions.k8s.io/queues.muster.dev" "namespace/muster-system" \
    "serviceaccount/muster" "clusterrole.rbac.authorization.k8s.io/muster" "role.rbac.authorization.k8s.io/muster" \
    "mutatingwebhookconfiguration.admissionregistration.k8s.io/muster created" \
    "validatingwebhookconfiguration.admissionregistration.k8s.io/muster created" "controller.kubeconfig written"; do
  grep -qF "$line" "$tmp/install1" || fail "muster install did not report $line: $(cat "$tmp/install1")"
done
pass "muster install applied CRDs, RBAC, webhook registration and wrote the certificate and kubeconfig"
m install --out "$tmp/muster" --webhook-url "https://127.0.0.1:$port" >"$tmp/install2"
check "a second muster install changes nothing" \
  bash -c '! grep -E " (created|configured)$" "$1" && grep -q "tls.crt unchanged" "$1"' _ "$tmp/install2"
check "the muster ServiceAccount's kubeconfig works (least privilege: may list queues, not secrets)" \
  bash -c '"$1" --kubeconfig "$2" get queues.muster.dev >/dev/null && ! "$1" --kubeconfig "$2" get secrets -A >/dev/null 2>&1' \
  _ "$K8S_BIN/kubectl" "$tmp/muster/controller.kubeconfig"

# --- the webhook, as muster's ServiceAccount ------------------------------------------------
"$MUSTER_BIN" webhook --addr "127.0.0.1:$port" --tls-cert "$tmp/muster/tls.crt" --tls-key "$tmp/muster/tls.key" \
  --port-file "$tmp/port" --kubeconfig "$tmp/muster/controller.kubeconfig" \
  --controller-user system:serviceaccount:muster-system:muster >"$tmp/webhook.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || fail "muster webhook did not start: $(cat "$tmp/webhook.log")"
check "muster webhook serves /healthz over TLS with the installed CA" \
  test "$(curl -fsS --cacert "$tmp/muster/ca.crt" "https://127.0.0.1:$port/healthz")" = ok

# --- a tenant with edit rights in a managed namespace --------------------------------------
fresh_namespace $ns
k label namespace $ns muster.dev/managed=true team=e2e-admission >/dev/null
k -n $ns create rolebinding tenant-edit --clusterrole=edit --user=tenant >/dev/null
# Groups are muster's; give the tenant RBAC rights to them so that the webhook is what refuses.
k create clusterrole e2e-admission-groups --verb=create,update,patch,get --resource=groups.muster.dev >/dev/null
k -n $ns create rolebinding tenant-groups --clusterrole=e2e-admission-groups --user=tenant >/dev/null
cat <<YAML | k apply --server-side --field-manager=muster-e2e -f - >/dev/null
apiVersion: muster.dev/v1alpha1
kind: Queue
metadata: {name: $queue}
spec:
  quotas: {cpu: {nominal: 4}}
  namespaceSelector: {matchLabels: {team: e2e-admission}}
---
apiVersion: muster.dev/v1alpha1
kind: Queue
metadata: {name: $queue-elsewhere}
spec:
  namespaceSelector: {namespaces: [somewhere-else]}
YAML
held() { [[ $(qjob probe-$RANDOM 1 $queue | kt -n $ns create --dry-run=server -f - -o jsonpath='{.spec.suspend}' 2>/dev/null) == true ]]; }
eventually 20 "the apiserver sends queued Jobs through the webhook" held

# --- a valid Job is held for the queue -----------------------------------------------------
reviews() { # reviews HOOK KIND: reviews of KIND the webhook has answered on HOOK (its /metrics)
  curl -fsS --cacert "$tmp/muster/ca.crt" "https://127.0.0.1:$port/metrics" |
    awk -v h="hook=\"$1\"" -v kd="kind=\"$2\"" '/^muster_webhook_requests_total\{/ && index($0, h) && index($0, kd) {s += $NF} END {print s + 0}'
}
mutated=$(reviews mutate Job) validated=$(reviews validate Job)
qjob train 2 $queue | kt -n $ns create -f - >/dev/null
check "a queued Job's create costs one webhook call: mutate ($mutated -> $(reviews mutate Job)), not validate ($validated -> $(reviews validate Job))" \
  bash -c '(( $1 > $2 && $3 == $4 ))' _ "$(reviews mutate Job)" "$mutated" "$(reviews validate Job)" "$validated"
get() { k -n $ns get "$1" -o jsonpath="{$2}"; }
check "a queued Job is created suspended" test "$(get job/train .spec.suspend)" = true
check "its pods go to muster's scheduler" test "$(get job/train .spec.template.spec.schedulerName)" = muster
check "and nothing else is set" test "$(get job/train '.metadata.labels')" = '{"muster.dev/queue":"e2e-admission"}'
qjob indexed 2 $queue | sed 's/^spec:$/spec:\n  completionMode: Indexed/' | kt -n $ns create -f - >/dev/null
check "an indexed Job is held the same way" \
  test "$(get job/indexed .spec.suspend)/$(get job/indexed .spec.template.spec.schedulerName)" = true/muster
check "a held Job creates no pods" test "$(k -n $ns get pods -l batch.kubernetes.io/job-name=train -o name | wc -l)" -eq 0

# --- the queue cannot be bypassed ----------------------------------------------------------
kt -n $ns patch job train --type=merge -p '{"spec": {"suspend": false}}' >/dev/null
check "a tenant unsuspending a queued Job leaves it suspended" test "$(get job/train .spec.suspend)" = true
check "and records a resume request for muster" \
  bash -c '[[ $1 =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]]' _ "$(get job/train '.metadata.annotations.muster\.dev/resume-requested')"
refused "a Job leaving its queue" "metadata.labels[muster.dev/queue]: a Job cannot leave its queue" \
  kt -n $ns label job train muster.dev/queue-
refused "a Job changing its queue" "a Job cannot move from queue e2e-admission to queue other" \
  kt -n $ns label job train --overwrite muster.dev/queue=other
refused "a Job with an unknown queue" 'metadata.labels[muster.dev/queue]: queue "nope" does not exist' \
  kt -n $ns create -f - <<<"$(qjob unknown 1 nope)"
refused "a Job in a queue that does not admit the namespace" \
  "queue $queue-elsewhere does not take work from namespace $ns (see its spec.namespaceSelector)" \
  kt -n $ns create -f - <<<"$(qjob elsewhere 1 $queue-elsewhere)"

# --- reserved keys --------------------------------------------------------------------------
refused "a Job with a reserved label" \
  "metadata.labels[muster.dev/admitted]: the key is reserved for muster: only muster may set it" \
  kt -n $ns create -f - <<<"$(qjob forged 1 $queue 100m '    muster.dev/admitted: "true"')"
refused "a tenant back-dating the resume request" \
  "metadata.annotations[muster.dev/resume-requested]: the key is reserved for muster: only muster may change it" \
  kt -n $ns annotate job train --overwrite muster.dev/resume-requested=2020-01-01T00:00:00Z
mpatch "/apis/batch/v1/namespaces/$ns/jobs/train" '{"metadata": {"annotations": {"muster.dev/placed": "yes"}}}' >/dev/null
pass "muster itself sets a reserved annotation"
refused "a tenant removing muster's annotation" \
  "metadata.annotations[muster.dev/placed]: the key is reserved for muster: only muster may remove it" \
  kt -n $ns annotate job train muster.dev/placed-

# --- forged placement -----------------------------------------------------------------------
refused "a pod with a preset nodeName in a managed namespace" \
  "spec.nodeName: pods in namespace $ns cannot choose their node" \
  kt -n $ns create -f - <<<"$(gpod pinned '{"app": "x"}' '"nodeName": "node-1"')"
uid=$(get job/train .metadata.uid)
forged=$(gpod train-forged '{"batch.kubernetes.io/job-name": "train"}' '"schedulerName": "muster"' |
  python3 -c 'import json,sys; p=json.load(sys.stdin); p["metadata"]["ownerReferences"]=[{"apiVersion":"batch/v1","kind":"Job","name":"train","uid":sys.argv[1],"controller":True}]; print(json.dumps(p))' "$uid")
refused "a tenant forging a member of a Job" "metadata.ownerReferences: only the Job controller creates the pods of Job train" \
  kt -n $ns create -f - <<<"$forged"

# --- sizes ----------------------------------------------------------------------------------
refused "a Job that can never fit its queue" \
  "spec.parallelism: 50 pods x cpu 1 = cpu 50, but queue $queue allows at most cpu 4 (nominal 4; no cohort to borrow from)" \
  kt -n $ns create -f - <<<"$(qjob huge 50 $queue 1)"
refused "a bad min-members annotation" "metadata.annotations[muster.dev/min-members]: \"most\" is not a whole number" \
  kt -n $ns create -f - <<<"$(qjob elastic 2 $queue 100m '  annotations:
    muster.dev/min-members: most')"
refused "a bad group size" "metadata.labels[muster.dev/group-size]: \"zero\" is not a whole number" \
  kt -n $ns create -f - <<<"$(gpod w-bad '{"muster.dev/group": "w", "muster.dev/group-size": "zero", "muster.dev/queue": "'$queue'"}')"

# --- pod fields muster does not place ------------------------------------------------------
# claimed HOW: the object (YAML on stdin) with its pod spec claiming a GPU through DRA
# (resource.k8s.io/v1), as JSON: HOW=template names a ResourceClaimTemplate, HOW=shared a claim
# several pods share by name; the container's resources.claims names it.
claimed() {
  python3 -c '
import json, sys, yaml
o = yaml.safe_load(sys.stdin)
spec = o["spec"]["template"]["spec"] if o["kind"] == "Job" else o["spec"]
key = {"template": "resourceClaimTemplateName", "shared": "resourceClaimName"}[sys.argv[1]]
spec["resourceClaims"] = [{"name": "gpu", key: "one-gpu"}]
spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
print(json.dumps(o))' "$1"
}
refused "a queued Job whose pods share a claim by name (the apiserver keeps the field)" \
  "spec.template.spec.resourceClaims[0]: muster places claims made from a template for each pod" \
  kt -n $ns create -f - <<<"$(qjob gpu 1 $queue | claimed shared)"
# A plain group's pods may claim devices from a template: muster allocates the claims it makes
# (test-muster-dra.sh places such a group).
gpod w-gpu '{"muster.dev/group": "w-gpu", "muster.dev/queue": "'$queue'"}' | claimed template |
  kt -n $ns create -f - >/dev/null
check "a group pod claiming a device through a template is accepted and gated for muster" \
  test "$(get pod/w-gpu '.spec.schedulingGates[*].name') $(get pod/w-gpu .spec.schedulerName)" = "muster.dev/admission muster"

# --- plain pod groups -----------------------------------------------------------------------
gpod w-0 '{"muster.dev/group": "w", "muster.dev/group-size": "2", "muster.dev/queue": "'$queue'"}' |
  kt -n $ns create -f - >/dev/null
check "a group pod is gated for muster" \
  test "$(get pod/w-0 '.spec.schedulingGates[*].name') $(get pod/w-0 .spec.schedulerName)" = "muster.dev/admission muster"
check "and stays unscheduled" test -z "$(get pod/w-0 .spec.nodeName)"

# --- Groups and admitted jobs ---------------------------------------------------------------
group_yaml="{\"apiVersion\": \"muster.dev/v1alpha1\", \"kind\": \"Group\", \"metadata\": {\"name\": \"train\"},
  \"spec\": {\"queue\": \"$queue\", \"members\": {\"min\": 2}, \"resources\": {\"cpu\": \"100m\"}}}"
refused "a tenant creating a Group" "Group $ns/train: Group objects are created by muster" \
  kt -n $ns create -f - <<<"$group_yaml"
km -n $ns create -f - <<<"$group_yaml" >/dev/null
mpatch "/apis/muster.dev/v1alpha1/namespaces/$ns/groups/train/status" '{"status": {"phase": "Running"}}' >/dev/null
pass "muster creates the Group and marks it Running"
refused "a tenant changing muster's Group" "spec: Group $ns/train is written by muster only" \
  kt -n $ns patch group train --type=merge -p '{"spec": {"members": {"min": 40}}}'
mpatch "/apis/batch/v1/namespaces/$ns/jobs/train" '{"spec": {"suspend": false}}' >/dev/null
check "muster (and only muster) resumes the Job" test "$(get job/train .spec.suspend)" = false
# A running Job may change its pod count (muster grows its group, or releases the members of the
# pods the Job controller deletes: test-muster-job-shapes.sh); its requests cannot change while it
# runs (the apiserver keeps a running Job's template).
kt -n $ns patch job train --type=merge -p '{"spec": {"parallelism": 1}}' >/dev/null
pass "resizing a running Job's pod count is allowed"
# Parallelism beyond completions changes no group: still 2 pods at once.
kt -n $ns patch job train --type=merge -p '{"spec": {"parallelism": 3}}' >/dev/null
pass "raising parallelism past completions (the group stays 2 pods) is allowed"
kt -n $ns patch job train --type=merge -p '{"spec": {"suspend": true, "parallelism": 1}}' >/dev/null
check "suspending and resizing at once is allowed" test "$(get job/train .spec.suspend)/$(get job/train .spec.parallelism)" = true/1

# --- nothing else is disturbed --------------------------------------------------------------
fresh_namespace $plain_ns
gpod bystander '{"app": "bystander"}' | k -n $plain_ns create -f - >/dev/null
check "a pod without muster labels in an unmanaged namespace is left alone" \
  test "$(k -n $plain_ns get pod bystander -o jsonpath='{.spec.schedulerName}/{.spec.schedulingGates}')" = default-scheduler/
running() { [[ $(k -n $plain_ns get pod bystander -o jsonpath='{.status.phase}') == Running ]]; }
eventually 60 "and the default scheduler runs it" running
job_yaml plain 1 | k -n $plain_ns create -f - >/dev/null
check "a Job without a queue is not suspended" test "$(k -n $plain_ns get job plain -o jsonpath='{.spec.suspend}')" = false
check "the webhook logged its refusals" grep -q refused "$tmp/webhook.log"

k delete namespace $ns $plain_ns --wait=false >/dev/null
