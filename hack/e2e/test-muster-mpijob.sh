#!/usr/bin/env bash
# e2e: an MPIJob (kubeflow.org/v2beta1) with muster, against Kubeflow's real mpi-operator (built
# from its Go module by hack/third-party.sh, run here as a local process). An MPIJob with the
# queue label is created with spec.runPolicy.suspend and muster as the scheduler of its launcher
# and workers; muster makes it ONE group of the launcher and every worker, owned by the MPIJob,
# admits it and resumes it; the operator creates the workers and the launcher's Job, and muster
# binds each pod to the node of its member (the launcher member 0, worker i member 1+i). The
# launcher's Job is no group of its own. The launcher completes, so do the MPIJob and the Group.
# An MPIJob too big for the cluster waits with no pod created; a worker template with a preset
# nodeName is refused. The CRD is removed after, so later tests run without it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-mpijob
echo "test-muster-mpijob" >&2
cleanup() {
  local rc=$?
  muster_down
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  mpi_operator_down $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mpi_operator_up "$MUSTER_CLUSTER_DIR/logs/mpi-operator.log"

touch "$muster_log"
log_from=$(( $(wc -l < "$muster_log") + 1 ))
muster_up
fresh_namespace $ns
eventually 30 "muster watches MPIJobs (the CRD is installed)" bash -c \
  "tail -n +$log_from '$muster_log' | grep -q 'the MPIJob CRD is installed; watching MPIJobs'"

# mpijob_yaml NAME WORKERS CPU [WORKER_EXTRA]: a launcher KWOK runs for 6 s and WORKERS workers
# that run until the operator removes them (cleanPodPolicy: Running)
mpijob_yaml() {
  cat <<YAML
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: $1
  labels: {muster.dev/queue: default}
spec:
  slotsPerWorker: 1
  runPolicy: {cleanPodPolicy: Running, backoffLimit: 0}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        metadata:
          annotations: {kwok.muster.dev/run-seconds: "6", e2e.muster.dev/test: "true"}
        spec:
          terminationGracePeriodSeconds: 0
          containers:
          - name: launcher
            image: kwok-fake
            command: [mpirun, hostname]
            resources:
              requests: {cpu: "$3", memory: 1Mi}
    Worker:
      replicas: $2
      template:
        metadata:
          annotations: {kwok.muster.dev/run-seconds: "600", e2e.muster.dev/test: "true"}
        spec:
          terminationGracePeriodSeconds: 0
${4:-}
          containers:
          - name: worker
            image: kwok-fake
            resources:
              requests: {cpu: "$3", memory: 1Mi}
YAML
}
field() { k -n $ns get "$@" 2>/dev/null; }

out=$(mpijob_yaml pi 3 10m | k -n $ns create -f - -o jsonpath='{.spec.runPolicy.suspend} {.spec.mpiReplicaSpecs.*.template.spec.schedulerName}')
check "the webhook held the MPIJob and named muster its pods' scheduler ($out)" test "$out" = "true muster muster"
check_workload_group $ns pi mpijob MPIJob 4 "the launcher and the 3 workers"
eventually 30 "muster admitted the group and resumed the MPIJob" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get mpijob pi -o jsonpath='{.spec.runPolicy.suspend}') == false ]]"
placed() { on_assigned $ns pi training.kubeflow.org/job-name=pi 4 2>/dev/null; }
eventually 60 "all 4 pods are bound, each on the node its Group assigned to its member" placed
member_of() { # member_of ROLE [REPLICA_INDEX]
  local sel="training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=$1"
  [[ -n ${2:-} ]] && sel+=",training.kubeflow.org/replica-index=$2"
  k -n $ns get pods -l "$sel" -o jsonpath='{.items[0].metadata.annotations.muster\.dev/member}'
}
members="$(member_of launcher) $(member_of worker 0) $(member_of worker 1) $(member_of worker 2)"
check "the launcher is member 0 and worker i member 1+i ($members)" test "$members" = "0 1 2 3"
check "the launcher's Job is no group of its own (one Group in the namespace)" \
  test "$(k -n $ns get groups.muster.dev -o name)" = "group.muster.dev/pi"
check "muster's events are on the MPIJob" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get events --field-selector involvedObject.kind=MPIJob,involvedObject.name=pi -o jsonpath='{.items[*].reportingComponent}' | grep -q muster"
eventually 90 "the MPIJob succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get mpijob pi -o jsonpath='{.status.conditions[?(@.type==\"Succeeded\")].status}') == True ]]"
eventually 30 "and its Group is Succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev pi -o jsonpath='{.status.phase}') == Succeeded ]]"

# --- an MPIJob that does not fit waits, with no pod; a pinned worker is refused ---------------
# 1 + 200 pods of 64 cpu: more than the 100 nodes of 100 cpu hold.
mpijob_yaml huge 200 64 | k -n $ns create -f - >/dev/null
check_waits_unmade $ns huge MPIJob training.kubeflow.org/job-name=huge
check_deleted_with_group $ns huge mpijob MPIJob
pinned() { mpijob_yaml pinned 2 10m "          nodeName: $(k get nodes -o jsonpath='{.items[0].metadata.name}')" | k -n $ns create -f -; }
refused "an MPIJob whose workers choose their node" \
  "spec.mpiReplicaSpecs.Worker.template.spec.nodeName: the pods of an MPIJob in queue default cannot choose their node" pinned
