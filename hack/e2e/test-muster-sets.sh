#!/usr/bin/env bash
# e2e: groups of member sets, against the real mpi-operator, KubeRay and JobSet controllers (run
# as local processes, as in test-muster-mpijob.sh, test-muster-rayjob.sh, test-muster-jobset.sh),
# on 8 KWOK nodes of 8 nvidia.com/gpu each (scenarios/clusters/gpu-8.yaml).
#
# Five MPIJobs, each a 1-cpu launcher and 2 whole-node (8-GPU) workers: muster runs 4 at once, all
# 64 GPUs in use, each launcher beside workers on a GPU node; a group sized like its largest member
# would hold 3 nodes per MPIJob and run only 2. The fifth waits, none of its pods bound, and runs once one
# finishes. The Group of each says its pod sets (spec.sets, launcher then worker, with each one's
# requests). A RayJob (a cpu head and a GPU worker group) and a JobSet (a driver and GPU workers)
# then run side by side. For all three kinds every bound pod asks exactly what its member's set
# holds. Last, plain pods of two elastic sets (muster.dev/set-min) start with each set's minimum
# and grow in the sets' order. For the whole test hack/e2e/overcommit.py checks every 0.5 s that
# no node has more requested than it has allocatable.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-sets
echo "test-muster-sets" >&2
tmp=$(mktemp -d)
logs=$MUSTER_CLUSTER_DIR/logs
checker_pid=""
cleanup() {
  local rc=$?
  stop_process "$checker_pid"
  muster_down
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  mpi_operator_down $rc
  kuberay_operator_down $rc
  jobset_controller_down $rc
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the operators, then muster (whose first discovery finds their CRDs) -----------------------
mpi_operator_up "$logs/mpi-operator.log"
kuberay_operator_up "$logs/kuberay-operator.log"
jobset_controller_up "$tmp" "$logs/jobset-controller.log"
python3 "$hack_dir/e2e/overcommit.py" --kubeconfig "$KUBECONFIG" --kubectl "$K8S_BIN/kubectl" --interval 0.5 \
  --log "$tmp/overcommit.log" --state "$tmp/overcommit.json" &
checker_pid=$!
touch "$muster_log"
log_from=$(( $(wc -l < "$muster_log") + 1 ))
muster_up
fresh_namespace $ns
for kind in MPIJob RayJob JobSet; do
  eventually 30 "muster watches ${kind}s" bash -c \
    "tail -n +$log_from '$muster_log' | grep -q 'the $kind CRD is installed; watching ${kind}s'"
done

# pod_template INDENT NAME RUN_SECONDS CPU [GPUS [FIELD]]: a pod template (metadata and spec) of one
# container asking CPU and 1Gi, and GPUS nvidia.com/gpu (requests and limits), FIELD one more field
# of its spec, indented INDENT spaces
pod_template() {
  local gpu="" limits=""
  if [[ -n ${5:-} ]]; then gpu=", nvidia.com/gpu: $5"; limits=$'\n'"      limits: {nvidia.com/gpu: $5}"; fi
  sed "s/^/$(printf '%*s' "$1" '')/" <<YAML
metadata:
  annotations: {kwok.muster.dev/run-seconds: "$3", e2e.muster.dev/test: "true"}
spec:
  terminationGracePeriodSeconds: 0
  ${6:-}
  containers:
  - name: $2
    image: kwok-fake
    resources:
      requests: {cpu: "$4", memory: 1Gi$gpu}$limits
YAML
}
# sets_are NAME SETS: the Group NAME's sets are SETS ("NAMExMEMBERS ...")
sets_are() {
  [[ $(k -n $ns get groups.muster.dev "$1" -o jsonpath='{range .spec.sets[*]}{.name}x{.members.min} {end}' 2>/dev/null) == "$2" ]]
}
# gpus_of NAME SET: nvidia.com/gpu a member of set SET of the Group NAME holds
gpus_of() { k -n $ns get groups.muster.dev "$1" -o jsonpath="{.spec.sets[$2].resources.nvidia\.com/gpu}"; }

# --- MPIJobs: a 1-cpu launcher and 2 whole-node workers ------------------------------------------
# The launcher runs 30 s (its MPIJob then succeeds and the operator removes the workers).
mpijob_yaml() {
  cat <<YAML
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: $1
  labels: {muster.dev/queue: default}
spec:
  slotsPerWorker: 8
  runPolicy: {cleanPodPolicy: Running, backoffLimit: 0}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
$(pod_template 8 launcher 30 1)
    Worker:
      replicas: 2
      template:
$(pod_template 8 worker 600 4 8)
YAML
}
# mpi_sample: from one listing of the pods, "WHOLE NODES GPUS APART": MPIJobs whose launcher and
# both workers run, nodes that run a worker, GPUs the running workers ask, launchers on a node
# without a worker
mpi_sample() {
  k -n $ns get pods -l training.kubeflow.org/job-name -o json | python3 -c '
import json, sys
pods = [p for p in json.load(sys.stdin)["items"] if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"]
label = lambda p, k: p["metadata"]["labels"].get("training.kubeflow.org/" + k)
running = {}
for p in pods:
    running[label(p, "job-name")] = running.get(label(p, "job-name"), 0) + 1
workers = [p for p in pods if label(p, "job-role") == "worker"]
nodes = {p["spec"]["nodeName"] for p in workers}
gpus = sum(int(c["resources"]["requests"].get("nvidia.com/gpu", 0)) for p in workers for c in p["spec"]["containers"])
apart = [p for p in pods if label(p, "job-role") == "launcher" and p["spec"]["nodeName"] not in nodes]
print(sum(n == 3 for n in running.values()), len(nodes), gpus, len(apart))'
}
t_mpi=$(date +%s)
for i in 1 2 3 4 5; do mpijob_yaml mpi-$i; echo ---; done | k -n $ns create -f - >/dev/null
eventually 30 "the Group of an MPIJob is its launcher then its 2 workers (spec.sets launcher x1, worker x2)" \
  sets_are mpi-1 "launcherx1 workerx2 "
check "a launcher's member holds no GPU, a worker's 8" test "$(gpus_of mpi-1 0)/$(gpus_of mpi-1 1)" = /8
check "and its cpu: the launcher's 1, a worker's 4" test \
  "$(k -n $ns get groups.muster.dev mpi-1 -o jsonpath='{.spec.sets[0].resources.cpu}/{.spec.sets[1].resources.cpu}')" = 1000m/4000m
whole4() { [[ $(mpi_sample | cut -d' ' -f1) == 4 ]]; }
eventually 90 "4 MPIJobs run at once, launcher and workers (sized like a worker, 2 would)" whole4
read -r whole nodes gpus apart < <(mpi_sample)
check "at that moment the workers run on all 8 nodes and ask all their 64 GPUs ($whole MPIJobs, $nodes nodes, $gpus GPUs)" \
  test "$nodes/$gpus" = 8/64
check "every launcher runs beside workers, on a GPU node ($apart apart)" test "$apart" = 0
phases=$(k -n $ns get groups.muster.dev -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}')
check "one MPIJob waits in the queue ($phases)" test "$(grep -o '=Queued' <<<"$phases" | wc -l)" = 1
waiting=$(grep -o '[a-z0-9-]*=Queued' <<<"$phases" | cut -d= -f1)
# First in the queue's line, its pods are made ahead (test-muster-ahead.sh) and wait unbound.
bound=$(k -n $ns get pods -l training.kubeflow.org/job-name="$waiting" -o jsonpath='{.items[*].spec.nodeName}')
check "$waiting, with none of its pods bound" test -z "$bound"
for i in 1 2 3 4 5; do
  [[ mpi-$i == "$waiting" ]] && continue
  check_sets_hold $ns mpi-$i training.kubeflow.org/job-name=mpi-$i "MPIJob mpi-$i"
done
all_succeeded() {
  [[ $(k -n $ns get mpijobs -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Succeeded")].status}{"\n"}{end}' |
       grep -c True) == 5 ]]
}
eventually 150 "all 5 MPIJobs succeeded, $waiting once another's workers were gone" all_succeeded
pass "the 5 MPIJobs ran in $(( $(date +%s) - t_mpi ))s"

# --- a RayJob (a cpu head, a GPU worker group) and a JobSet (a driver, GPU workers) -------------
rayjob_yaml() {
  cat <<YAML
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: $1
  labels: {muster.dev/queue: default}
spec:
  entrypoint: python -c "import ray; ray.init()"
  submissionMode: HTTPMode
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
$(pod_template 8 ray-head 600 2)
    workerGroupSpecs:
    - groupName: gpu
      replicas: 2
      minReplicas: 2
      maxReplicas: 2
      rayStartParams: {}
      template:
$(pod_template 8 ray-worker 600 4 8)
YAML
}
jobset_yaml() {
  cat <<YAML
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: $1
  labels: {muster.dev/queue: default}
spec:
  replicatedJobs:
  - name: driver
    template:
      spec:
        backoffLimit: 0
        template:
$(pod_template 10 driver 600 1 "" "restartPolicy: Never")
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        backoffLimit: 0
        template:
$(pod_template 10 worker 600 2 4 "restartPolicy: Never")
YAML
}
{ rayjob_yaml tune; echo ---; jobset_yaml train; } | k -n $ns create -f - >/dev/null
for g in "tune headgroupx1 gpux2 " "train driverx1 workersx4 "; do
  name=${g%% *} want=${g#* }
  eventually 30 "the Group $name is its sets ($want)" sets_are "$name" "$want"
done
check "a Ray head's member holds no GPU, a worker's 8" test "$(gpus_of tune 0)/$(gpus_of tune 1)" = /8
check "a JobSet driver's member holds no GPU, a worker's 4" test "$(gpus_of train 0)/$(gpus_of train 1)" = /4
eventually 30 "KubeRay made the RayJob's Ray cluster" bash -c \
  "[[ -n \$('$K8S_BIN/kubectl' -n $ns get rayclusters -o name) ]]"
cluster=$(k -n $ns get rayclusters -o jsonpath='{.items[0].metadata.name}')
ray_placed() { on_assigned $ns tune "ray.io/cluster=$cluster" 3 2>/dev/null; }
eventually 60 "the RayJob's 3 pods are bound, each on its member's node" ray_placed
jobset_placed() { on_assigned $ns train jobset.sigs.k8s.io/jobset-name=train 5 2>/dev/null; }
eventually 60 "the JobSet's 5 pods are bound, each on its member's node" jobset_placed
check_sets_hold $ns tune "ray.io/cluster=$cluster" "RayJob tune"
check_sets_hold $ns train jobset.sigs.k8s.io/jobset-name=train "JobSet train"

# --- plain pods of two elastic sets (muster.dev/set-min) ----------------------------------------
# Set a (3 pods of a whole node's 8 GPUs, at least 1) and set b (4 such pods, at least 1) on the 4
# nodes tune and train leave free: every set's minimum first, then a's extra members (a is first
# by name), so a runs 3 and b 1. Once train is deleted, b grows into the 2 nodes it frees.
plain_yaml() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {muster.dev/queue: default, muster.dev/group: elastic, muster.dev/group-size: "7", muster.dev/set: $2,
           muster.dev/set-size: "$3", muster.dev/set-min: "1"}
  annotations: {kwok.muster.dev/run-seconds: "600", e2e.muster.dev/test: "true"}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: kwok-fake
    resources:
      requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: 8}
      limits: {nvidia.com/gpu: 8}
YAML
}
{
  for i in 0 1 2; do plain_yaml a-$i a 3; echo ---; done
  for i in 0 1 2 3; do plain_yaml b-$i b 4; echo ---; done
} | k -n $ns create -f - >/dev/null
# bound_are "A B": A pods of set a and B of set b are bound
bound_are() {
  [[ $(k -n $ns get pods -l muster.dev/group=elastic -o json | python3 -c '
import json, sys
n = {"a": 0, "b": 0}
for p in json.load(sys.stdin)["items"]:
    if p["spec"].get("nodeName"):
        n[p["metadata"]["labels"]["muster.dev/set"]] += 1
print(n["a"], n["b"])') == "$1" ]]
}
eventually 60 "the plain group starts each set's minimum, then a's extra members: a 3, b 1" bound_are "3 1"
check_sets_hold $ns elastic muster.dev/group=elastic "plain pods elastic"
sleep 3
check "b's other 3 pods wait, gated, while no room is free" bound_are "3 1"
check "the Group's members are 2..7, the sets' sums" test \
  "$(k -n $ns get groups.muster.dev elastic -o jsonpath='{.spec.members.min}..{.spec.members.max}')" = 2..7
k -n $ns delete jobset train --wait=false >/dev/null
eventually 90 "train's 2 nodes freed, b grows by 2 (a 3, b 3)" bound_are "3 3"

# --- the over-commit checker's verdict -----------------------------------------------------------
alive=0; kill -0 "$checker_pid" 2>/dev/null && alive=1
stop_process "$checker_pid"
read -r polls errors violations < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s["polls"], s["errors"], s["violations"])' "$tmp/overcommit.json")
check "the over-commit checker ran through the test ($polls polls, $errors errors)" \
  test "$alive" = 1 -a "$polls" -ge 50 -a $(( errors * 10 )) -le "$polls"
[[ $violations == 0 ]] || sed 's/^/       /' "$tmp/overcommit.log" >&2
check "no node had more requested than allocatable in $polls polls" test "$violations" = 0
