#!/usr/bin/env bash
# e2e: a RayJob (ray.io/v1) with muster, against KubeRay's real operator (built from its Go module
# by hack/third-party.sh, run here as a local process). A RayJob with the queue label is created
# suspended with muster as the scheduler of its head and workers; muster makes it ONE group of the
# head and every worker, owned by the RayJob, admits it and resumes it; KubeRay creates the Ray
# cluster (a RayCluster `<rayjob>-<5 characters>`, no group of its own), and muster binds each pod
# to the node of its member (the head member 0). KWOK's pods serve no Ray dashboard, so KubeRay
# cannot learn that the Ray job ended: the test stops the operator and writes the RayJob's status
# as KubeRay would (Complete, SUCCEEDED), and the Group is Succeeded. A RayJob too big for the
# cluster waits with no Ray cluster made; a worker template with a preset nodeName is refused.
# A RayCluster with the queue label, on its own, is held the same way as one group of its head and
# workers (its templates labelled muster.dev/ray-cluster, so that its pods are told from a RayJob's
# cluster's), placed and bound exactly, grows and shrinks with its workers' replicas while it
# serves, and its Group goes when it is deleted.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-rayjob
echo "test-muster-rayjob" >&2
cleanup() {
  local rc=$?
  muster_down
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  kuberay_operator_down $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kuberay_operator_up "$MUSTER_CLUSTER_DIR/logs/kuberay-operator.log"

touch "$muster_log"
log_from=$(( $(wc -l < "$muster_log") + 1 ))
muster_up
fresh_namespace $ns
eventually 30 "muster watches RayJobs (the CRD is installed)" bash -c \
  "tail -n +$log_from '$muster_log' | grep -q 'the RayJob CRD is installed; watching RayJobs'"
eventually 30 "muster watches RayClusters" bash -c \
  "tail -n +$log_from '$muster_log' | grep -q 'the RayCluster CRD is installed; watching RayClusters'"

# ray_template CONTAINER CPU [FIELD]: a Ray pod's template, under a group's `template:` (FIELD
# is one more field of its pod spec)
ray_template() {
  cat <<YAML
    metadata:
      annotations: {e2e.muster.dev/test: "true"}
    spec:
      terminationGracePeriodSeconds: 0
      ${3:-}
      containers:
      - name: $1
        image: kwok-fake
        resources:
          requests: {cpu: "$2", memory: 1Mi}
YAML
}
# cluster_spec WORKERS CPU [WORKER_FIELD]: a head and WORKERS workers that run until deleted (a
# Ray cluster's spec, unindented)
cluster_spec() {
  printf '%s\n' "headGroupSpec:" "  rayStartParams: {}" "  template:"
  ray_template ray-head "$2"
  printf '%s\n' "workerGroupSpecs:" "- groupName: cpu" "  replicas: $1" "  minReplicas: 1" "  maxReplicas: $1" \
    "  rayStartParams: {}" "  template:"
  ray_template ray-worker "$2" "${3:-}"
}
# rayjob_yaml NAME WORKERS CPU [WORKER_FIELD]: a RayJob on that cluster
rayjob_yaml() {
  printf '%s\n' "apiVersion: ray.io/v1" "kind: RayJob" "metadata:" "  name: $1" "  labels: {muster.dev/queue: default}" \
    "spec:" "  entrypoint: python -c \"import ray; ray.init()\"" "  submissionMode: HTTPMode" "  rayClusterSpec:"
  cluster_spec "${@:2}" | sed 's/^/    /'
}
# raycluster_yaml NAME WORKERS CPU [WORKER_FIELD]: that cluster on its own
raycluster_yaml() {
  printf '%s\n' "apiVersion: ray.io/v1" "kind: RayCluster" "metadata:" "  name: $1" "  labels: {muster.dev/queue: default}" "spec:"
  cluster_spec "${@:2}" | sed 's/^/  /'
}
field() { k -n $ns get "$@" 2>/dev/null; }

out=$(rayjob_yaml tune 3 10m | k -n $ns create -f - -o jsonpath='{.spec.suspend} {.spec.rayClusterSpec.headGroupSpec.template.spec.schedulerName} {.spec.rayClusterSpec.workerGroupSpecs[0].template.spec.schedulerName}')
check "the webhook held the RayJob and named muster its pods' scheduler ($out)" test "$out" = "true muster muster"
check_workload_group $ns tune rayjob RayJob 4 "the head and the 3 workers"
check "the head's member holds what the head asks (1Mi); a worker's what KubeRay's worker pods ask, its init container (256Mi) included" \
  test "$(field groups.muster.dev tune -o jsonpath='{range .spec.sets[*]}{.name}={.resources.memory} {end}')" = \
  "headgroup=1048576 cpu=268435456 "
# KubeRay writes the RayJob back without a false suspend (omitempty): resumed is "not true".
eventually 30 "muster admitted the group and resumed the RayJob" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get rayjob tune -o jsonpath='{.spec.suspend}') != true ]]"
eventually 30 "KubeRay made the Ray cluster, controlled by the RayJob" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get rayclusters -o jsonpath='{.items[0].metadata.ownerReferences[0].kind}' | grep -qx RayJob"
cluster=$(k -n $ns get rayclusters -o jsonpath='{.items[0].metadata.name}')
placed() { on_assigned $ns tune "ray.io/cluster=$cluster" 4 2>/dev/null; }
eventually 60 "all 4 pods of $cluster are bound, each on the node its Group assigned to its member" placed
held=$(sets_hold_pods $ns tune "ray.io/cluster=$cluster") || fail "every pod asks what its member's set holds"
pass "every pod asks what its member's set holds ($held)"
check "the head is member 0" test \
  "$(k -n $ns get pods -l "ray.io/cluster=$cluster,ray.io/node-type=head" -o jsonpath='{.items[0].metadata.annotations.muster\.dev/member}')" = 0
check "the Ray cluster is no group of its own (one Group in the namespace)" \
  test "$(k -n $ns get groups.muster.dev -o name)" = "group.muster.dev/tune"
eventually 60 "KubeRay sees its Ray cluster ready" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get raycluster $cluster -o jsonpath='{.status.state}') == ready ]]"

# --- a RayJob that does not fit waits, with no Ray cluster made -----------------------------
rayjob_yaml huge 200 64 | k -n $ns create -f - >/dev/null
check_waits_unmade $ns huge RayJob "ray.io/node-type,ray.io/cluster!=$cluster"
check "no Ray cluster of it was made" test -z "$(k -n $ns get rayclusters -l ray.io/originated-from-cr-name=huge -o name)"
check_deleted_with_group $ns huge rayjob RayJob

# --- a RayCluster on its own: its own group, held, placed, serving until deleted ---------------
out=$(raycluster_yaml serve 2 10m | k -n $ns create -f - -o jsonpath='{.spec.suspend} {.spec.headGroupSpec.template.spec.schedulerName} {.spec.workerGroupSpecs[0].template.spec.schedulerName} {.spec.headGroupSpec.template.metadata.labels.muster\.dev/ray-cluster} {.spec.workerGroupSpecs[0].template.metadata.labels.muster\.dev/ray-cluster}')
check "the webhook held the RayCluster, named muster its pods' scheduler and labelled its templates ($out)" \
  test "$out" = "true muster muster true true"
check_workload_group $ns serve raycluster RayCluster 3 "the head and the 2 workers"
eventually 30 "muster admitted the group and resumed the RayCluster" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get raycluster serve -o jsonpath='{.spec.suspend}') != true ]]"
served() { on_assigned $ns serve "ray.io/cluster=serve" 3 2>/dev/null; }
eventually 60 "all 3 pods of RayCluster serve are bound, each on the node its Group assigned to its member" served
check "its head is member 0" test \
  "$(k -n $ns get pods -l "ray.io/cluster=serve,ray.io/node-type=head" -o jsonpath='{.items[0].metadata.annotations.muster\.dev/member}')" = 0
check "the RayJob's cluster is still no group of its own (Groups: serve and tune)" \
  test "$(k -n $ns get groups.muster.dev -o name | sort | tr '\n' ' ')" = "group.muster.dev/serve group.muster.dev/tune "
# Scaled while it serves (as the autoscaler does, through replicas): the group grows, and then
# releases the members of the workers KubeRay deletes once they are gone.
scale() { k -n $ns patch raycluster serve --type json -p "[{\"op\": \"replace\", \"path\": \"/spec/workerGroupSpecs/0/replicas\", \"value\": $1}, {\"op\": \"replace\", \"path\": \"/spec/workerGroupSpecs/0/maxReplicas\", \"value\": 3}]" >/dev/null; }
members_of() { k -n $ns get groups.muster.dev serve -o jsonpath='{.status.allocation[*].member}' | wc -w; }
scale 3
eventually 30 "scaled to 3 workers, its Group grew to 4 members" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev serve -o jsonpath='{.status.allocation[*].member}' | wc -w) -eq 4 ]]"
served4() { on_assigned $ns serve "ray.io/cluster=serve" 4 2>/dev/null; }
eventually 60 "its 4 pods are bound, each on its member's node" served4
scale 1
served2() { on_assigned $ns serve "ray.io/cluster=serve" 2 2>/dev/null && [[ $(members_of) -eq 2 ]]; }
eventually 60 "scaled to 1 worker, KubeRay deleted 2 and the Group released their members (2 left, each pod on its own)" served2
check "and it kept serving (phase $(k -n $ns get groups.muster.dev serve -o jsonpath='{.status.phase}'))" \
  test "$(k -n $ns get groups.muster.dev serve -o jsonpath='{.status.phase}')" = Running
check_deleted_with_group $ns serve raycluster RayCluster
eventually 30 "its pods are gone with it" bash -c "[[ -z \$('$K8S_BIN/kubectl' -n $ns get pods -l ray.io/cluster=serve -o name) ]]"
pinned_cluster() { raycluster_yaml pinned-cluster 2 10m "nodeName: $(k get nodes -o jsonpath='{.items[0].metadata.name}')" | k -n $ns create -f -; }
refused "a RayCluster whose workers choose their node" \
  "spec.workerGroupSpecs[0].template.spec.nodeName: the pods of a RayCluster in queue default cannot choose their node" pinned_cluster

# KubeRay would learn the Ray job's end from the head's dashboard, which KWOK's pods do not serve.
kuberay_operator_stop
k -n $ns patch rayjob tune --subresource status --type merge \
  -p '{"status":{"jobDeploymentStatus":"Complete","jobStatus":"SUCCEEDED"}}' >/dev/null
eventually 30 "the RayJob done, its Group is Succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev tune -o jsonpath='{.status.phase}') == Succeeded ]]"

# --- a pinned worker is refused ----------------------------------------------------------------
pinned() { rayjob_yaml pinned 2 10m "nodeName: $(k get nodes -o jsonpath='{.items[0].metadata.name}')" | k -n $ns create -f -; }
refused "a RayJob whose workers choose their node" \
  "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.nodeName: the pods of a RayJob in queue default cannot choose their node" pinned
