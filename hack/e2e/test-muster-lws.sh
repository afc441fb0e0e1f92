#!/usr/bin/env bash
# e2e: a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) with muster, against the real LWS
# controller (built from its Go module by hack/third-party.sh, run here as a local process with
# its own LeaderWorkerSet and pod webhooks registered by URL). A LeaderWorkerSet labelled with a
# queue cannot be suspended, so muster holds its pods: the webhook copies the queue label into
# both pod templates, every pod is gated and joins the group of its leader (<lws>-<index>) with
# LWS's size; muster admits each replica group whole and binds every pod to the node its Group
# assigned to its member. A group that does not fit waits with every pod gated and none bound;
# scaling another set down releases the group it drops, and the waiting group starts. Deleting a
# set releases the rest. A leader that asks less than its workers is a set of its own, so a group
# that could never start sized like its workers runs. Hostile
# or unstartable sets are refused naming the field. The CRD is removed after.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-lws
echo "test-muster-lws" >&2
lws_dir=$("$hack_dir/third-party.sh" lws)
tmp=$(mktemp -d)
lws_pid=""
lws_log=$MUSTER_CLUSTER_DIR/logs/lws-controller.log
cleanup() {
  local rc=$?
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  muster_down
  k delete mutatingwebhookconfiguration lws-e2e --ignore-not-found >/dev/null 2>&1 || true
  k delete validatingwebhookconfiguration lws-e2e --ignore-not-found >/dev/null 2>&1 || true
  if [[ -n $lws_pid ]] && kill -0 "$lws_pid" 2>/dev/null; then kill "$lws_pid"; wait "$lws_pid" 2>/dev/null || true; fi
  (( rc == 0 )) || { echo "--- lws controller log (tail)" >&2; tail -n 15 "$lws_log" >&2 || true; }
  k delete -f "$lws_dir/leaderworkersets.yaml" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  k label nodes --all muster.dev/rack- >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the LeaderWorkerSet controller ----------------------------------------------------------
k apply --server-side -f "$lws_dir/leaderworkersets.yaml" >/dev/null
eventually 60 "the CRD leaderworkersets.leaderworkerset.x-k8s.io is established" bash -c \
  "[[ \$('$K8S_BIN/kubectl' get crd leaderworkersets.leaderworkerset.x-k8s.io -o jsonpath='{.status.conditions[?(@.type==\"Established\")].status}' 2>/dev/null) == True ]]"
operator_webhook_config "$tmp" config.lws.x-k8s.io/v1alpha1
port=$operator_port ca=$operator_ca
mkdir -p "$(dirname "$lws_log")"
"$lws_dir/lws" --config "$tmp/config.yaml" --kubeconfig "$KUBECONFIG" >"$lws_log" 2>&1 &
lws_pid=$!
# hook KIND PATH NAME GROUP RESOURCE OPERATIONS [OBJECT_SELECTOR_KEY]
hook() {
  local selector=""
  [[ -n ${7:-} ]] && selector="objectSelector: {matchExpressions: [{key: $7, operator: Exists}]}"
  cat <<YAML
- name: $3
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {url: "https://127.0.0.1:$port/$2", caBundle: "$ca"}
  rules: [{apiGroups: ["$4"], apiVersions: [v1], operations: [$6], resources: [$5]}]
  $selector
YAML
}
{
  echo "apiVersion: admissionregistration.k8s.io/v1"
  echo "kind: MutatingWebhookConfiguration"
  echo "metadata: {name: lws-e2e}"
  echo "webhooks:"
  hook Mutating mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset mleaderworkerset.kb.io leaderworkerset.x-k8s.io leaderworkersets "CREATE, UPDATE"
  hook Mutating mutate--v1-pod mpod.kb.io "" pods CREATE leaderworkerset.sigs.k8s.io/name
} | k apply -f - >/dev/null
{
  echo "apiVersion: admissionregistration.k8s.io/v1"
  echo "kind: ValidatingWebhookConfiguration"
  echo "metadata: {name: lws-e2e}"
  echo "webhooks:"
  hook Validating validate-leaderworkerset-x-k8s-io-v1-leaderworkerset vleaderworkerset.kb.io leaderworkerset.x-k8s.io leaderworkersets "CREATE, UPDATE"
  hook Validating validate--v1-pod vpod.kb.io "" pods "CREATE, UPDATE" leaderworkerset.sigs.k8s.io/name
} | k apply -f - >/dev/null
eventually 60 "the LeaderWorkerSet controller (v$LWS_VERSION) serves its webhooks" \
  curl -sk --max-time 1 -o /dev/null "https://127.0.0.1:$port/"

muster_up
fresh_namespace $ns

# lws_yaml NAME REPLICAS SIZE CPU [EXTRA_SPEC_LINE] [LEADER_CPU]: a queued LeaderWorkerSet whose
# workers ask CPU each, and its leader LEADER_CPU (default CPU) (KWOK runs them until deleted, as
# a server runs)
lws_yaml() {
  local pod leader
  pod_of() {
    cat <<YAML
        metadata:
          annotations: {e2e.muster.dev/test: "true"}
        spec:
          terminationGracePeriodSeconds: 0
          containers:
          - name: main
            image: kwok-fake
            resources:
              requests: {cpu: "$1", memory: 1Mi}
YAML
  }
  pod=$(pod_of "$4")
  leader=$(pod_of "${6:-$4}")
  cat <<YAML
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: $1
  labels: {muster.dev/queue: default}
spec:
  replicas: $2
  ${5:-}
  leaderWorkerTemplate:
    size: $3
    leaderTemplate:
$leader
    workerTemplate:
$pod
YAML
}

out=$(lws_yaml serve 2 3 4 | k -n $ns create -f - -o jsonpath='{.spec.leaderWorkerTemplate.leaderTemplate.metadata.labels.muster\.dev/queue} {.spec.leaderWorkerTemplate.workerTemplate.metadata.labels.muster\.dev/queue}')
check "the webhook put the queue into both pod templates ($out)" test "$out" = "default default"
for g in serve-0 serve-1; do
  runs_whole $ns $g "muster.dev/group=$g" 3
done
check "each group is its leader and that leader's workers" test \
  "$(k -n $ns get pods -l muster.dev/group=serve-1 -o jsonpath='{.items[*].metadata.name}')" = "serve-1 serve-1-1 serve-1-2"
check "every pod names muster its scheduler, ungated" test \
  "$(k -n $ns get pods -l leaderworkerset.sigs.k8s.io/name=serve -o jsonpath='{.items[*].spec.schedulerName} {.items[*].spec.schedulingGates}')" \
  = "muster muster muster muster muster muster "
eventually 60 "the LeaderWorkerSet is Available (all its pods ready)" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get leaderworkersets serve -o jsonpath='{.status.conditions[?(@.type==\"Available\")].status}') == True ]]"

# --- a group that does not fit waits whole: every pod gated, none bound -------------------------
# 4 nodes of 8 cpu: serve's two groups of 3 pods of 4 cpu leave 8 cpu, and wide's group needs 12.
lws_yaml wide 1 3 4 | k -n $ns create -f - >/dev/null
eventually 60 "all 3 pods of wide-0 exist" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l muster.dev/group=wide-0 -o name | wc -l) -eq 3 ]]"
eventually 30 "its Group waits in the queue" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev wide-0 -o jsonpath='{.status.phase}') == Queued ]]"
sleep 2
check "none of its pods is bound, each is gated" test \
  "$(k -n $ns get pods -l muster.dev/group=wide-0 -o jsonpath='{range .items[*]}{.spec.nodeName}{.spec.schedulingGates[0].name}{"\n"}{end}' | sort -u)" \
  = "muster.dev/admission"

# --- scaling down releases the group it drops, and the waiting group starts ---------------------
k -n $ns patch leaderworkerset serve --type merge -p '{"spec":{"replicas":1}}' >/dev/null
eventually 60 "scaling serve to 1 replica deletes the Group of serve-1" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get groups.muster.dev serve-1 >/dev/null 2>&1"
runs_whole $ns wide-0 "muster.dev/group=wide-0" 3
check "serve-0 keeps running where it was placed" on_assigned $ns serve-0 "muster.dev/group=serve-0" 3

# --- refusals ----------------------------------------------------------------------------------
refused "a LeaderReady set (its gated leader would never be ready)" "spec.startupPolicy: LeaderReady" \
  bash -c "$(declare -f lws_yaml); lws_yaml ready 1 2 1 'startupPolicy: LeaderReady' | '$K8S_BIN/kubectl' -n $ns create -f -"
refused "a worker template with a preset node" "workerTemplate.spec.nodeName" \
  bash -c "$(declare -f lws_yaml); lws_yaml pinned 1 2 1 | sed '0,/terminationGracePeriodSeconds/!{s/terminationGracePeriodSeconds: 0/nodeName: kwok-node-0/}' | '$K8S_BIN/kubectl' -n $ns create -f -"
refused "moving the set to another queue" "cannot move from queue default" \
  k -n $ns label leaderworkerset serve muster.dev/queue=other --overwrite

check_deleted() { ! k -n $ns get groups.muster.dev serve-0 wide-0 -o name 2>/dev/null | grep -q .; }
k -n $ns delete leaderworkerset serve wide >/dev/null
eventually 60 "deleting the sets deletes their Groups" check_deleted

# --- topology: each group within one rack --------------------------------------------------
# Racks across the node order (nodes 0 and 2 in one, 1 and 3 in the other), so that packing
# alone would put a group of two 6-cpu pods on two racks. LWS's exclusive-topology would make it
# wait for a scheduled leader before creating the workers (never, under muster): refused; muster's
# annotation in both templates keeps each group in one rack.
mapfile -t nodes < <(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
for i in "${!nodes[@]}"; do k label node "${nodes[$i]}" muster.dev/rack=rack-$(( i % 2 )) --overwrite >/dev/null; done
refused "a set with LWS's exclusive-topology (workers wait for a scheduled leader)" "LWS then creates a group's workers only once" \
  bash -c "$(declare -f lws_yaml); lws_yaml exclusive 1 2 1 | sed 's|^  labels: {muster.dev/queue: default}\$|&\\n  annotations: {leaderworkerset.sigs.k8s.io/exclusive-topology: muster.dev/rack}|' | '$K8S_BIN/kubectl' -n $ns create -f -"
lws_yaml racked 1 2 6 | sed 's|annotations: {e2e.muster.dev/test: "true"}|annotations: {e2e.muster.dev/test: "true", muster.dev/required-topology: rack}|' |
  k -n $ns create -f - >/dev/null
runs_whole $ns racked-0 "muster.dev/group=racked-0" 2
check "its Group asks for one rack" test \
  "$(k -n $ns get groups.muster.dev racked-0 -o jsonpath='{.spec.topology.mode}/{.spec.topology.level}')" = required/rack
racks=$(for n in $(k -n $ns get pods -l muster.dev/group=racked-0 -o jsonpath='{.items[*].spec.nodeName}'); do
  k get node "$n" -o jsonpath='{.metadata.labels.muster\.dev/rack}{"\n"}'; done | sort -u)
check "its 2 pods run on 2 nodes of one rack ($racks)" test "$(wc -l <<<"$racks")" -eq 1 -a -n "$racks"
k -n $ns delete leaderworkerset racked >/dev/null

# --- a leader that asks less than its workers: two sets of one group ---------------------------
# 4 nodes of 8 cpu: a leader of 1 cpu and 4 workers of 7 cpu need 29 cpu. Sized like its workers
# the group would need 35 and never start; as a leader set and a worker set it runs.
lws_yaml lead 1 5 7 '' 1 | k -n $ns create -f - >/dev/null
runs_whole $ns lead-0 "muster.dev/group=lead-0" 5
check "its Group has a leader set and a worker set" test \
  "$(k -n $ns get groups.muster.dev lead-0 -o jsonpath='{range .spec.sets[*]}{.name}={.members.min}x{.resources.cpu} {end}')" \
  = "leader=1x1000m worker=4x7000m "
check "the leader pod is labelled with its set" test \
  "$(k -n $ns get pod lead-0 -o jsonpath='{.metadata.labels.muster\.dev/set}')" = leader
check_sets_hold $ns lead-0 muster.dev/group=lead-0 "LeaderWorkerSet lead (replica lead-0)"
k -n $ns delete leaderworkerset lead >/dev/null
