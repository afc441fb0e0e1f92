#!/usr/bin/env bash
# e2e: a Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1) with muster, against the
# real Trainer controller manager and the real JobSet controller under it (both built from their
# Go modules by hack/third-party.sh, run here as local processes with their webhooks registered
# by URL). A TrainJob names a runtime (here the ClusterTrainingRuntime muster-e2e: a replicated
# Job "initializer" of one small pod beside the replicated Job "node", whose pods KWOK finishes
# after 15 s) and the Trainer makes from the two a JobSet of the TrainJob's name, owned by it,
# suspended while the TrainJob is, with numNodes node pods.
# Without muster's say, a suspended TrainJob without the queue label gets its suspended JobSet of
# 3 pods; resumed, kube-scheduler runs them and the TrainJob completes. With the queue label, the
# webhook holds the TrainJob and puts its queue on the JobSet, which is ONE group (owned by the
# JobSet) of two sets, each holding what its own pods ask; muster resumes the TrainJob once it is
# placed, the Trainer resumes the JobSet, and each pod is bound to its member's node; the TrainJob
# completes and so does the Group. One too
# big for the cluster waits held, its user's resume is refused, and deleting it deletes its
# Group. The CRDs of both are removed after, so later tests run without them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-trainjob
echo "test-muster-trainjob" >&2
tmp=$(mktemp -d)
cleanup() {
  local rc=$?
  muster_down
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  trainer_controller_down $rc
  jobset_controller_down $rc
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the JobSet and Trainer controllers, and a runtime ------------------------------------
mkdir -p "$tmp/jobset" "$tmp/trainer"
jobset_controller_up "$tmp/jobset" "$MUSTER_CLUSTER_DIR/logs/jobset-controller.log"
trainer_controller_up "$tmp/trainer" "$MUSTER_CLUSTER_DIR/logs/trainer-controller.log"
# runtime_job NAME CONTAINER [TEMPLATE_METADATA]: a replicated Job of the runtime, one replica
# whose pods run CONTAINER (a YAML flow map) for 15 s on KWOK
runtime_job() {
  cat <<YAML
      - name: $1
        replicas: 1
        template:
          ${3:+metadata: $3}
          spec:
            template:
              metadata:
                annotations: {kwok.muster.dev/run-seconds: "15", e2e.muster.dev/test: "true"}
              spec:
                restartPolicy: Never
                terminationGracePeriodSeconds: 0
                containers: [$2]
YAML
}
# An initializer of one small pod, then the replicated Job "node" (the Trainer's ancestor label
# marks it as the one that trains); numNodes and resourcesPerNode come from each TrainJob.
k apply -f - >/dev/null <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: muster-e2e}
spec:
  mlPolicy: {numNodes: 1, torch: {numProcPerNode: auto}}
  template:
    spec:
      replicatedJobs:
$(runtime_job initializer '{name: initializer, image: kwok-fake, resources: {requests: {cpu: 100m, memory: 64Mi}}}')
$(runtime_job node '{name: node, image: kwok-fake}' '{labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}')
YAML
pass "the ClusterTrainingRuntime muster-e2e is accepted by the Trainer's webhook"

touch "$muster_log"
log_from=$(( $(wc -l < "$muster_log") + 1 ))
muster_up
fresh_namespace $ns

# trainjob_yaml NAME NODES [LABELS]: a suspended TrainJob of NODES pods of 500m on muster-e2e,
# with LABELS (the inside of a YAML flow map, e.g. "muster.dev/queue: default")
trainjob_yaml() {
  cat <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $1
  labels: {${3:-}}
spec:
  suspend: true
  runtimeRef: {name: muster-e2e}
  trainer:
    numNodes: $2
    resourcesPerNode: {requests: {cpu: 500m, memory: 128Mi}}
YAML
}
field() { k -n $ns get "$@" 2>/dev/null; }

# --- the harness, without muster: the Trainer makes the JobSet, kube-scheduler runs it ---------
trainjob_yaml plain 3 | k -n $ns create -f - >/dev/null
eventually 30 "the Trainer made the JobSet plain for the TrainJob plain" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get jobset plain >/dev/null 2>&1"
owner=$(field jobset plain -o jsonpath='{.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[?(@.controller==true)].uid}')
check "the JobSet is controlled by the TrainJob ($owner)" test "$owner" = "TrainJob/$(field trainjob plain -o jsonpath='{.metadata.uid}')"
out=$(field jobset plain -o jsonpath='{.spec.suspend} {.spec.replicatedJobs[?(@.name=="node")].template.spec.parallelism}')
check "it is suspended, its replicated Job node of parallelism 3 ($out)" test "$out" = "true 3"
k -n $ns patch trainjob plain --type merge -p '{"spec":{"suspend":false}}' >/dev/null
eventually 30 "resuming the TrainJob resumes its JobSet" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get jobset plain -o jsonpath='{.spec.suspend}') == false ]]"
eventually 60 "its 4 pods (the initializer and 3 nodes) ran to completion (KWOK, 15 s)" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l jobset.sigs.k8s.io/jobset-name=plain --field-selector status.phase=Succeeded -o name | wc -l) == 4 ]]"
eventually 60 "the TrainJob is Complete" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get trainjob plain -o jsonpath='{.status.conditions[?(@.type==\"Complete\")].status}') == True ]]"
# The garbage collector deletes the JobSet, once it watches TrainJobs: it looks for new kinds
# every 30 s, so for a CRD this new that can take a while (seen: 0 to over 30 s).
k -n $ns delete trainjob plain >/dev/null
eventually 120 "deleting the TrainJob deletes its JobSet" bash -c "! '$K8S_BIN/kubectl' -n $ns get jobset plain >/dev/null 2>&1"

# --- with muster: a queued TrainJob is held, its JobSet is the group, resumed through the TrainJob -
eventually 30 "muster watches JobSets (the CRD is installed)" bash -c \
  "tail -n +$log_from '$muster_log' | grep -q 'the JobSet CRD is installed; watching JobSets'"
# Created without spec.suspend: the webhook holds it and puts its queue on its JobSet.
out=$(trainjob_yaml llama 3 "muster.dev/queue: default" | sed '/^  suspend: true$/d' |
  k -n $ns create -f - -o jsonpath='{.spec.suspend} {.spec.labels.muster\.dev/queue}')
check "the webhook held the TrainJob and named its JobSet's queue ($out)" test "$out" = "true default"
check_workload_group $ns llama jobset JobSet 4 "the pods of its JobSet's initializer and node Jobs (1 + 3)"
check "its sets are the initializer's pod (100m) and the 3 nodes (500m each)" test \
  "$(field groups.muster.dev llama -o jsonpath='{range .spec.sets[*]}{.name}={.members.min}x{.resources.cpu} {end}')" \
  = "initializer=1x100m node=3x500m "
out=$(field jobset llama -o jsonpath='{.metadata.labels.muster\.dev/queue} {.spec.replicatedJobs[0].template.spec.template.spec.schedulerName}')
check "the Trainer's JobSet is in queue default and its pods name muster ($out)" test "$out" = "default muster"
eventually 30 "muster admitted the group and resumed the TrainJob" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get trainjob llama -o jsonpath='{.spec.suspend}') == false ]]"
eventually 30 "the Trainer resumed its JobSet" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get jobset llama -o jsonpath='{.spec.suspend}') == false ]]"
trained() { on_assigned $ns llama jobset.sigs.k8s.io/jobset-name=llama 4 2>/dev/null; }
eventually 60 "all 4 pods are bound, each on the node its Group assigned to its member" trained
check_sets_hold $ns llama jobset.sigs.k8s.io/jobset-name=llama "TrainJob llama"
eventually 60 "the TrainJob is Complete" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get trainjob llama -o jsonpath='{.status.conditions[?(@.type==\"Complete\")].status}') == True ]]"
eventually 30 "its Group is Succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev llama -o jsonpath='{.status.phase}') == Succeeded ]]"

# --- one too big for the cluster waits, held; its user cannot resume it past the queue ---------
trainjob_yaml huge 30000 "muster.dev/queue: default" | k -n $ns create -f - >/dev/null
eventually 30 "a TrainJob of 30000 node pods (15000 cpu, the cluster has 10004) has its Group" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev huge -o jsonpath='{.spec.members.min}') == 30001 ]]"
sleep 2
check "it stays held, and no pod of it was made" test \
  "$(field trainjob huge -o jsonpath='{.spec.suspend}')/$(k -n $ns get pods -l jobset.sigs.k8s.io/jobset-name=huge -o name | wc -l)" = true/0
refused "resuming a queued TrainJob" \
  "spec.suspend: muster resumes a TrainJob in queue default once its whole group is placed" \
  k -n $ns patch trainjob huge --type merge -p '{"spec":{"suspend":false}}'
k -n $ns delete trainjob huge >/dev/null
# The garbage collector takes the JobSet, and the JobSet's Group (see above on its delay).
eventually 120 "deleting the TrainJob deletes its Group" bash -c "! '$K8S_BIN/kubectl' -n $ns get groups.muster.dev huge >/dev/null 2>&1"
