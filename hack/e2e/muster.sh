# muster on the harness cluster (sourced by the test-muster-*.sh tests, after lib.sh):
#   muster_up     install muster (CRDs, RBAC, webhook registration, default Queue) and start
#                 `muster controller` with its webhook under the muster ServiceAccount's identity
#   muster_kill   SIGKILL the controller (a crash); muster_stop SIGTERM it (it gives its Lease
#                 up); muster_start starts it again (same store) with $MUSTER_CONTROLLER_ARGS
#                 added to its flags
#   muster_down   stop it and remove the webhook registration (it fails closed); a controller
#                 that exited by itself before that fails the test
#   muster_metric NAME   a sample of the controller's /metrics (NAME with its labels, if any)
#   group_status_writes  Group status writes the apiserver has served (its /metrics)
#   jobset_controller_up, trainer_controller_up, mpi_operator_up, kuberay_operator_up   the real
#                 JobSet, Kubeflow Trainer, MPI and KubeRay operators as local processes (_down
#                 stops them and removes what they installed)
#   sets_hold_pods NS GROUP SELECTOR   each bound pod asks what its member's set holds
#   check_sets_hold NS GROUP SELECTOR WHAT   the same, as a check
#   rust_e2e TEST WHAT MIN_POLLS [OBJECT...]   the whole of a test written in Rust
# State in $MUSTER_CLUSTER_DIR/muster-e2e; the controller log is logs/muster-controller.log.
resolve_muster_bin
muster_dir=$MUSTER_CLUSTER_DIR/muster-e2e
muster_log=$MUSTER_CLUSTER_DIR/logs/muster-controller.log

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# operator_certs DIR CERT_DIR: for an operator run as a local process with its own webhooks: a
# throwaway CA (DIR/ca.crt) and a serving certificate for 127.0.0.1 (CERT_DIR/tls.{crt,key}).
# Sets operator_port (a free loopback port to serve them on) and operator_ca (the CA, base64, for
# a caBundle).
operator_certs() {
  local dir=$1 certs=$2
  mkdir -p "$certs"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=operator-e2e-ca \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$certs/tls.key" -out "$dir/tls.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$dir/ext"
  openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 1 \
    -extfile "$dir/ext" -out "$certs/tls.crt" >/dev/null 2>&1
  operator_port=$(free_port)
  operator_ca=$(base64 -w0 < "$dir/ca.crt")
}

# operator_webhook_config DIR API_VERSION: for a controller-runtime operator (JobSet, LWS) run as
# a local process with its own webhooks: operator_certs (the certificate in DIR/certs), and
# DIR/config.yaml, the operator's Configuration (API_VERSION) serving them on operator_port with
# leader election, internal cert management and metrics off.
operator_webhook_config() {
  local dir=$1 api_version=$2
  operator_certs "$dir" "$dir/certs"
  cat > "$dir/config.yaml" <<YAML
apiVersion: $api_version
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: $operator_port, certDir: $dir/certs}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: "127.0.0.1:$(free_port)"}
YAML
}

# operator_hook NAME PATH GROUP VERSION RESOURCE: one entry of a webhook configuration's webhooks
# list: NAME, calling https://127.0.0.1:$operator_port/PATH (trusting $operator_ca) on CREATE and
# UPDATE of GROUP/VERSION RESOURCE, failing closed
operator_hook() {
  cat <<YAML
- name: $1
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {url: "https://127.0.0.1:$operator_port/$2", caBundle: "$operator_ca"}
  rules: [{apiGroups: [$3], apiVersions: [$4], operations: [CREATE, UPDATE], resources: [$5]}]
YAML
}

# crd_established NAME: the CRD NAME (just applied) is established
# crd_not_deleting NAME: wait until an earlier test's deletion of CRD NAME is over (applied again
# while it is terminating, the CRD would vanish under the next test once its objects are gone)
crd_not_deleting() {
  eventually 120 "the CRD $1 an earlier test deleted is gone" bash -c \
    "[[ -z \$('$K8S_BIN/kubectl' get crd $1 -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) ]]"
}

# crds_deleted CRD...: delete the CRDs and take the finalizers off their objects left behind: with
# the operator and muster gone, nothing else would, and the CRDs would stay terminating
crds_deleted() {
  local crd ns name
  k delete crd "$@" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  for crd in "$@"; do
    k get "$crd" -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name}{"\n"}{end}' 2>/dev/null |
      while read -r ns name; do
        [[ -z $name ]] || k -n "$ns" patch "$crd" "$name" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
      done
  done
}

crd_established() {
  eventually 60 "the CRD $1 is established" bash -c \
    "[[ \$('$K8S_BIN/kubectl' get crd $1 -o jsonpath='{.status.conditions[?(@.type==\"Established\")].status}' 2>/dev/null) == True ]]"
}

# stop_process PID: SIGTERM a process this shell started, if it runs, and reap it
stop_process() {
  if [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; then kill "$1"; wait "$1" 2>/dev/null || true; fi
}

# --- the JobSet controller (jobset.x-k8s.io/v1alpha2) ------------------------------------------
# jobset_controller_up DIR LOG: the JobSet CRD, and the real JobSet controller (built from its Go
# module by hack/third-party.sh) run as a local process logging to LOG, its Configuration and
# certificates in DIR, with its defaulting and validating webhooks registered by URL (jobset-e2e);
# returns once it serves them. Sets jobset_dir, jobset_pid, jobset_log.
jobset_pid=""
jobset_log=""
jobset_controller_up() {
  local dir=$1 kind path
  jobset_log=$2
  jobset_dir=$("$hack_dir/third-party.sh" jobset)
  k apply --server-side -f "$jobset_dir/jobsets.yaml" >/dev/null
  crd_established jobsets.jobset.x-k8s.io
  operator_webhook_config "$dir" config.jobset.x-k8s.io/v1alpha1
  mkdir -p "$(dirname "$jobset_log")"
  "$jobset_dir/jobset" --config "$dir/config.yaml" --kubeconfig "$KUBECONFIG" >"$jobset_log" 2>&1 &
  jobset_pid=$!
  for kind in Mutating Validating; do
    path=mutate; [[ $kind == Validating ]] && path=validate
    { printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: %sWebhookConfiguration\n' $kind
      printf 'metadata: {name: jobset-e2e}\nwebhooks:\n'
      operator_hook $path.jobset.x-k8s.io $path-jobset-x-k8s-io-v1alpha2-jobset jobset.x-k8s.io v1alpha2 jobsets
    } | k apply -f - >/dev/null
  done
  eventually 60 "the JobSet controller (v$JOBSET_VERSION) serves its webhooks" \
    curl -sk --max-time 1 -o /dev/null "https://127.0.0.1:$operator_port/"
}

# jobset_controller_down [RC]: remove the webhooks, stop the controller (with RC nonzero, show the
# end of its log), and delete the CRD, so that later tests run without JobSets
jobset_controller_down() {
  k delete mutatingwebhookconfiguration jobset-e2e --ignore-not-found >/dev/null 2>&1 || true
  k delete validatingwebhookconfiguration jobset-e2e --ignore-not-found >/dev/null 2>&1 || true
  stop_process "$jobset_pid"
  if (( ${1:-0} != 0 )) && [[ -n $jobset_log ]]; then
    echo "--- jobset controller log (tail)" >&2; tail -n 15 "$jobset_log" >&2 || true
  fi
  k delete crd jobsets.jobset.x-k8s.io --ignore-not-found --wait=false >/dev/null 2>&1 || true
}

# --- the Kubeflow Trainer controller (trainer.kubeflow.org/v1alpha1) ---------------------------
# trainer_controller_up DIR LOG: the Trainer's CRDs (TrainJob, TrainingRuntime,
# ClusterTrainingRuntime), and its real controller manager (built by hack/third-party.sh) run as a
# local process logging to LOG. It watches JobSets: jobset_controller_up first. It has no setting
# for its certificate's directory and reads $TMPDIR/k8s-webhook-server/serving-certs, so it runs
# with TMPDIR=DIR. Its three validating webhooks are registered by URL (trainer-e2e); returns once
# it serves them and its TrainJob controller runs. Sets trainer_dir, trainer_pid, trainer_log.
trainer_pid=""
trainer_log=""
trainer_crds=(trainjobs.trainer.kubeflow.org trainingruntimes.trainer.kubeflow.org clustertrainingruntimes.trainer.kubeflow.org)
trainer_controller_up() {
  local dir=$1 crd kind
  trainer_log=$2
  trainer_dir=$("$hack_dir/third-party.sh" trainer)
  k apply --server-side -f "$trainer_dir/trainjobs.yaml" -f "$trainer_dir/trainingruntimes.yaml" \
    -f "$trainer_dir/clustertrainingruntimes.yaml" >/dev/null
  for crd in "${trainer_crds[@]}"; do crd_established "$crd"; done
  operator_certs "$dir" "$dir/k8s-webhook-server/serving-certs"
  # Its own Configuration: no certDir; the webhook's host must be set (it panics without one).
  cat > "$dir/config.yaml" <<YAML
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
certManagement: {enable: false}
webhook: {host: 127.0.0.1, port: $operator_port}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: "127.0.0.1:$(free_port)"}
YAML
  mkdir -p "$(dirname "$trainer_log")"
  TMPDIR=$dir "$trainer_dir/trainer-controller-manager" --config "$dir/config.yaml" --kubeconfig "$KUBECONFIG" \
    >"$trainer_log" 2>&1 &
  trainer_pid=$!
  { printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n'
    printf 'metadata: {name: trainer-e2e}\nwebhooks:\n'
    for kind in trainjob trainingruntime clustertrainingruntime; do
      operator_hook validator.$kind.trainer.kubeflow.org validate-trainer-kubeflow-org-v1alpha1-$kind \
        trainer.kubeflow.org v1alpha1 ${kind}s
    done
  } | k apply -f - >/dev/null
  eventually 60 "the Kubeflow Trainer controller (v$TRAINER_VERSION) serves its webhooks" \
    curl -sk --max-time 1 -o /dev/null "https://127.0.0.1:$operator_port/"
  # It registers its controllers (and webhooks) only once its manager has started.
  eventually 60 "its TrainJob controller runs" bash -c \
    "grep -s 'Starting workers' '$trainer_log' | grep -q trainjob_controller"
}

# trainer_controller_down [RC]: stop the controller (with RC nonzero, show the end of its log),
# remove its webhooks and delete its CRDs. A runtime in use carries the Trainer's finalizer, which
# only the controller takes off; with the controller gone it is cleared here, or the CRD's
# deletion would hang on it.
trainer_controller_down() {
  local kind ns name
  stop_process "$trainer_pid"
  if (( ${1:-0} != 0 )) && [[ -n $trainer_log ]]; then
    echo "--- trainer controller log (tail)" >&2; tail -n 15 "$trainer_log" >&2 || true
  fi
  k delete validatingwebhookconfiguration trainer-e2e --ignore-not-found >/dev/null 2>&1 || true
  for kind in clustertrainingruntimes trainingruntimes; do
    k get "$kind.trainer.kubeflow.org" -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}' \
      2>/dev/null | while IFS=/ read -r ns name; do
        k ${ns:+-n "$ns"} patch "$kind.trainer.kubeflow.org" "$name" --type merge -p '{"metadata":{"finalizers":null}}' \
          >/dev/null 2>&1 || true
      done
  done
  k delete crd "${trainer_crds[@]}" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}

# --- Kubeflow's MPI operator (kubeflow.org/v2beta1) ----------------------------------------------
# mpi_operator_up LOG: the MPIJob CRD, and the real mpi-operator (built from its Go module by
# hack/third-party.sh) run as a local process logging to LOG; returns once it leads. Sets
# mpi_operator_dir, mpi_operator_pid, mpi_operator_log.
mpi_operator_pid=""
mpi_operator_log=""
mpi_operator_up() {
  mpi_operator_log=$1
  mpi_operator_dir=$("$hack_dir/third-party.sh" mpi-operator)
  crd_not_deleting mpijobs.kubeflow.org
  k apply --server-side -f "$mpi_operator_dir/mpijobs.yaml" >/dev/null
  crd_established mpijobs.kubeflow.org
  mkdir -p "$(dirname "$mpi_operator_log")"
  # Its leader-election lease goes to kube-system; its health port (8080) is fixed in v0.6.0.
  "$mpi_operator_dir/mpi-operator" --kubeConfig "$KUBECONFIG" --lock-namespace kube-system >"$mpi_operator_log" 2>&1 &
  mpi_operator_pid=$!
  eventually 60 "the mpi-operator (v$MPI_OPERATOR_VERSION) leads" grep -q "Leading started" "$mpi_operator_log"
}

# mpi_operator_down [RC]: stop the operator (with RC nonzero, show the end of its log) and delete
# the CRD, so that later tests run without MPIJobs
mpi_operator_down() {
  stop_process "$mpi_operator_pid"
  crds_deleted mpijobs.kubeflow.org
  if (( ${1:-0} != 0 )) && [[ -n $mpi_operator_log ]]; then
    echo "--- mpi-operator log (tail)" >&2; tail -n 15 "$mpi_operator_log" >&2 || true
  fi
}

# --- KubeRay's operator (ray.io/v1) --------------------------------------------------------------
# kuberay_operator_up LOG: the RayJob, RayCluster and RayService CRDs (the operator runs its
# RayService controller too, which needs that CRD), and KubeRay's real operator (built by
# hack/third-party.sh) run as a local process logging to LOG; returns once its controllers run.
# Sets kuberay_pid, kuberay_log. kuberay_operator_stop stops the process only.
kuberay_pid=""
kuberay_log=""
kuberay_crds=(rayjobs.ray.io rayclusters.ray.io rayservices.ray.io)
kuberay_operator_up() {
  local dir crd
  kuberay_log=$1
  dir=$("$hack_dir/third-party.sh" kuberay)
  for crd in "${kuberay_crds[@]}"; do crd_not_deleting "$crd"; done
  k apply --server-side -f "$dir/rayjobs.yaml" -f "$dir/rayclusters.yaml" -f "$dir/rayservices.yaml" >/dev/null
  for crd in "${kuberay_crds[@]}"; do crd_established "$crd"; done
  mkdir -p "$(dirname "$kuberay_log")"
  "$dir/ray-operator" --enable-leader-election=false --metrics-addr "127.0.0.1:$(free_port)" \
    --health-probe-bind-address "127.0.0.1:$(free_port)" --log-stdout-encoder console >"$kuberay_log" 2>&1 &
  kuberay_pid=$!
  eventually 60 "the KubeRay operator (v$KUBERAY_VERSION) runs its controllers" \
    grep -qs 'controllers.RayJob.*Starting workers' "$kuberay_log"
}
kuberay_operator_stop() { stop_process "$kuberay_pid"; }

# kuberay_operator_down [RC]: stop the operator (with RC nonzero, show the end of its log) and
# delete its CRDs
kuberay_operator_down() {
  kuberay_operator_stop
  crds_deleted "${kuberay_crds[@]}"
  if (( ${1:-0} != 0 )) && [[ -n $kuberay_log ]]; then
    echo "--- kuberay operator log (tail)" >&2; tail -n 15 "$kuberay_log" >&2 || true
  fi
}

muster_start() {
  # Its decisions (each transition, each hold patched) in the log, for a failed run to be read back.
  RUST_LOG=${MUSTER_E2E_LOG:-info,kube=warn,muster_controller::brain=debug,muster_controller::executor=debug} \
    "$MUSTER_BIN" controller --kubeconfig "$muster_dir/controller.kubeconfig" \
    --store "sqlite:$muster_dir/muster.db" --identity e2e-controller --lease-seconds 6 \
    --webhook-addr "127.0.0.1:$(cat "$muster_dir/port")" \
    --metrics-addr "127.0.0.1:$(cat "$muster_dir/metrics-port")" \
    --tls-cert "$muster_dir/tls.crt" --tls-key "$muster_dir/tls.key" ${MUSTER_CONTROLLER_ARGS:-} >>"$muster_log" 2>&1 &
  echo $! > "$muster_dir/pid"
  local i
  for i in $(seq 1 100); do
    curl -sk --max-time 1 "https://127.0.0.1:$(cat "$muster_dir/port")/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$muster_dir/pid")" 2>/dev/null || { tail -n 20 "$muster_log" >&2; fail "muster controller exited"; }
    sleep 0.1
  done
  fail "muster webhook did not come up"
}

# muster_in_namespace NS: muster up and a fresh namespace NS, both gone when the test exits.
muster_in_namespace() {
  muster_test_ns=$1
  trap 'muster_down; k delete namespace "$muster_test_ns" --wait=false --ignore-not-found >/dev/null 2>&1 || true' EXIT
  muster_up
  fresh_namespace "$muster_test_ns"
}

# runs_whole NS GROUP SELECTOR N: the Group GROUP gets N members, runs, and every pod of SELECTOR
# is bound on the node its Group assigned to its member
runs_whole() {
  local ns=$1 group=$2 selector=$3 n=$4
  eventually 30 "the Group $group has $n members" bash -c \
    "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev $group -o jsonpath='{.spec.members.min}') == $n ]]"
  eventually 30 "the group runs" bash -c \
    "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev $group -o jsonpath='{.status.phase}') =~ ^(Running|Succeeded)$ ]]"
  check "every pod runs on the node its Group assigned to its member" on_assigned "$ns" "$group" "$selector" "$n"
}

muster_up() {
  mkdir -p "$muster_dir" "$(dirname "$muster_log")"
  rm -f "$muster_dir"/muster.db*
  # A namespace an earlier test deleted can take a while to go; install cannot write into it.
  local i
  for i in $(seq 1 120); do
    [[ -z $(k get namespace muster-system -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) ]] && break
    (( i < 120 )) || fail "the namespace muster-system an earlier test deleted is still terminating after 120s"
    sleep 1
  done
  free_port > "$muster_dir/port"
  free_port > "$muster_dir/metrics-port"
  "$MUSTER_BIN" install --out "$muster_dir" --webhook-url "https://127.0.0.1:$(cat "$muster_dir/port")" >/dev/null
  # install creates Queue default only on a cluster without Queues; earlier tests leave theirs.
  printf 'apiVersion: muster.dev/v1alpha1\nkind: Queue\nmetadata: {name: default}\nspec: {}\n' | k apply -f - >/dev/null
  muster_start
  pass "muster installed; controller and webhook on 127.0.0.1:$(cat "$muster_dir/port")"
}

# remove_unreleased_muster: the cluster-wide objects `muster install` (other tests) leaves, which
# belong to no Helm release (Helm refuses to adopt them, as it should): a chart then goes onto a
# cluster without muster, as a user's would.
remove_unreleased_muster() {
  k delete clusterrole,clusterrolebinding muster --ignore-not-found >/dev/null
  k delete mutatingwebhookconfiguration,validatingwebhookconfiguration muster --ignore-not-found >/dev/null
  k delete validatingadmissionpolicy,validatingadmissionpolicybinding muster-pod-writes --ignore-not-found >/dev/null
  k delete crd queues.muster.dev cohorts.muster.dev reservations.muster.dev groups.muster.dev --ignore-not-found \
    --wait=true >/dev/null
}

# muster_signal SIGNAL: send SIGNAL to the controller, wait for it to exit, and forget its pid
# (a controller the test stopped is not one that exited by itself)
muster_signal() {
  local pid
  pid=$(cat "$muster_dir/pid" 2>/dev/null) || return 0
  kill -"$1" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$muster_dir/pid"
}
muster_kill() { muster_signal KILL; }
muster_stop() { muster_signal TERM; }

# A controller that exited by itself during a test fails the test, whatever the test checked:
# muster_down says so and leaves $muster_exited for hack/e2e/run.sh, which counts it.
muster_exited=$MUSTER_CLUSTER_DIR/muster-exited
muster_down() {
  local pid
  pid=$(cat "$muster_dir/pid" 2>/dev/null) || pid=""
  if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
    printf '  FAIL the muster controller exited during the test; the end of its log:\n' >&2
    tail -n 20 "$muster_log" >&2 || true
    touch "$muster_exited"
  fi
  muster_stop
  k delete mutatingwebhookconfiguration muster --ignore-not-found >/dev/null 2>&1 || true
  k delete validatingwebhookconfiguration muster --ignore-not-found >/dev/null 2>&1 || true
}

muster_metric() {
  # Empty, never a failure, when the controller does not answer: the caller's check says so.
  { curl -s --max-time 5 "http://127.0.0.1:$(cat "$muster_dir/metrics-port")/metrics" || true; } |
    awk -v name="$1" '$1 == name { print $2 }'
}

# queued_job_yaml NAME PODS [key=value...]: job_yaml with the queue label (default queue)
# Writes of Group statuses the apiserver has served (only muster writes them).
group_status_writes() {
  k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="groups"/ && /subresource="status"/ {s += $NF}
    END {print s + 0}'
}

queued_job_yaml() {
  job_yaml "$@" | sed 's/^metadata:/metadata:\n  labels: {muster.dev\/queue: default}/'
}

# pod_snapshot NS: job-name:node:phase of every pod of NS, one line each, from one listing
pod_snapshot() {
  k -n "$1" get pods -o jsonpath='{range .items[*]}{.metadata.labels.job-name}:{.spec.nodeName}:{.status.phase}{"\n"}{end}'
}
# holding JOB SNAPSHOT: how many pods of JOB in a pod_snapshot are bound and not finished
holding() { awk -F: -v j="$1" '$1==j && $2!="" && $3!="Succeeded" && $3!="Failed"' <<<"$2" | wc -l; }

group_phase() { k -n "$1" get groups.muster.dev "$2" -o jsonpath='{.status.phase}' 2>/dev/null; }

# check_workload_group NS NAME RESOURCE KIND MEMBERS WHAT: the Group of workload RESOURCE/NAME (a
# JobSet, an MPIJob, ...) comes with MEMBERS members (WHAT says which) and is owned by it
check_workload_group() {
  local ns=$1 name=$2 resource=$3 kind=$4 members=$5 what=$6
  eventually 30 "the Group $name is $what" bash -c \
    "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev $name -o jsonpath='{.spec.members.min}') == $members ]]"
  check "the Group is owned by the $kind" test \
    "$(k -n "$ns" get groups.muster.dev "$name" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].uid}')" \
    = "$kind/$(k -n "$ns" get "$resource" "$name" -o jsonpath='{.metadata.uid}')"
}

# check_waits_unmade NS NAME KIND PODS_SELECTOR: a workload too big for the cluster waits in the
# queue with none of its pods made
check_waits_unmade() {
  local ns=$1 name=$2 kind=$3 selector=$4
  eventually 30 "$(muster_a "$kind") too big for the cluster waits in the queue" bash -c \
    "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev $name -o jsonpath='{.status.phase}') == Queued ]]"
  sleep 3
  check "no pod of it was made" test -z "$(k -n "$ns" get pods -l "$selector" -o name)"
}

# check_deleted_with_group NS NAME RESOURCE KIND: deleting the workload deletes its Group
check_deleted_with_group() {
  local ns=$1 name=$2 resource=$3 kind=$4
  k -n "$ns" delete "$resource" "$name" >/dev/null
  eventually 30 "deleting the $kind deletes its Group" bash -c \
    "! '$K8S_BIN/kubectl' -n $ns get groups.muster.dev $name >/dev/null 2>&1"
}

# muster_a KIND: "a JobSet", "an MPIJob" (as muster_k8s::workload::a)
muster_a() { case $1 in [AEIOU]*|[FHLMNRSX][A-Z]*) echo "an $1" ;; *) echo "a $1" ;; esac; }

# on_assigned NS GROUP SELECTOR [N]: every bound pod of SELECTOR runs on the node its Group GROUP
# assigned to the member it fills (muster.dev/member, set through the binding); with N, exactly N
# pods, all bound, filling N distinct members
on_assigned() {
  python3 - "$1" "$2" "$3" "${4:-}" "$K8S_BIN/kubectl" <<'PY'
import json, subprocess, sys
ns, group, selector, n, kubectl = sys.argv[1:6]
get = lambda *a: json.loads(subprocess.check_output([kubectl, "-n", ns, "get", *a, "-o", "json"]))
assigned = {a["member"]: a["node"] for a in get("groups.muster.dev", group).get("status", {}).get("allocation", [])}
bad, members = [], []
for p in get("pods", "-l", selector)["items"]:
    node = p["spec"].get("nodeName")
    if not node and not n:
        continue
    member = (p["metadata"].get("annotations") or {}).get("muster.dev/member")
    if not node or member is None or assigned.get(int(member)) != node:
        bad.append(f'{p["metadata"]["name"]} on {node}, member {member}, assigned {assigned}')
    else:
        members.append(int(member))
if n and (len(members) != int(n) or len(set(members)) != int(n)):
    bad.append(f"members filled {sorted(members)}, want {n} distinct")
if bad:
    print("; ".join(bad), file=sys.stderr)
sys.exit(1 if bad or not assigned else 0)
PY
}

# sets_hold_pods NS GROUP SELECTOR: every bound, unfinished pod of SELECTOR asks exactly what a
# member of its set holds in the Group GROUP (spec.sets, or spec.resources for a group of alike
# members), its set found from its member (members are numbered set after set); pod requests are
# counted as the kubelet admits pods (overcommit.py's pod_requests: init containers, sidecars,
# overhead). Prints each set as "NAME xMEMBERS {requests}" and the pods checked.
sets_hold_pods() {
  python3 - "$1" "$2" "$3" "$K8S_BIN/kubectl" "$(dirname "${BASH_SOURCE[0]}")" <<'PY'
import json, subprocess, sys
ns, group, selector, kubectl, here = sys.argv[1:6]
sys.path.insert(0, here)
from overcommit import fmt, holds_resources, pod_requests, qty
get = lambda *a: json.loads(subprocess.check_output([kubectl, "-n", ns, "get", *a, "-o", "json"]))
spec = get("groups.muster.dev", group)["spec"]
sets = spec.get("sets") or [{"name": "(all)", "members": spec["members"], "resources": spec.get("resources", {})}]
first, bounds = 0, []
for s in sets:
    n = s["members"].get("max") or s["members"]["min"]
    bounds.append((first, first + n, s["name"], {r: qty(v) for r, v in (s.get("resources") or {}).items()}))
    first += n
bad, checked = [], 0
for p in get("pods", "-l", selector)["items"]:
    if not holds_resources(p):
        continue
    name, member = p["metadata"]["name"], (p["metadata"].get("annotations") or {}).get("muster.dev/member")
    at = [b for b in bounds if member is not None and b[0] <= int(member) < b[1]]
    if not at:
        bad.append(f"{name}: member {member} is in no set of {[b[:3] for b in bounds]}")
        continue
    _, _, set_name, holds = at[0]
    asks = {r: v for r, v in pod_requests(p["spec"]).items() if r != "pods" and v}
    if asks != {r: v for r, v in holds.items() if v}:
        bad.append(f"{name} (member {member}, set {set_name}) asks {{{', '.join(f'{r} {fmt(r, v)}' for r, v in sorted(asks.items()))}}}"
                   f", its set holds {{{', '.join(f'{r} {fmt(r, v)}' for r, v in sorted(holds.items()))}}}")
    checked += 1
print("; ".join(f"{b[2]} x{b[1] - b[0]} {{{', '.join(f'{r} {fmt(r, v)}' for r, v in sorted(b[3].items()))}}}" for b in bounds)
      + f"; {checked} pods checked")
if bad or not checked:
    print("\n".join(bad) or "no bound pod", file=sys.stderr)
    sys.exit(1)
PY
}

# check_sets_hold NS GROUP SELECTOR WHAT: sets_hold_pods, its summary in the line it passes
check_sets_hold() {
  local out
  out=$(sets_hold_pods "$1" "$2" "$3") || fail "$4: every bound pod asks what its member's set holds"
  pass "$4: every bound pod asks what its member's set holds ($out)"
}

# placed_on_assigned NS JOB: on_assigned for the pods of a Job
placed_on_assigned() { on_assigned "$1" "$2" "job-name=$2"; }

# kwok_pod_yaml NAME RUN_SECONDS LABELS: a bare pod that KWOK runs for RUN_SECONDS, with LABELS
# (the inside of a YAML flow map, e.g. "muster.dev/group: g, muster.dev/group-size: \"2\"")
kwok_pod_yaml() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {$3}
  annotations: {kwok.muster.dev/run-seconds: "$2", e2e.muster.dev/test: "true"}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: kwok-fake
    resources:
      requests: {cpu: 10m, memory: 1Mi}
YAML
}

# overcommit_watch DIR [CHECKER...]: an over-commit checker in the background, every 0.5 s, its
# log and state in DIR; sets checker_pid and waits until it has polled. CHECKER is a command that
# takes --kubeconfig, --interval, --log and --state: hack/e2e/overcommit.py (the default) or
# `$MUSTER_HARNESS_BIN overcommit` (the same checks in Rust, crates/muster-harness/src/overcommit.rs).
overcommit_watch() {
  local dir=$1
  shift
  (( $# )) || set -- python3 "$hack_dir/e2e/overcommit.py" --kubectl "$K8S_BIN/kubectl"
  "$@" --kubeconfig "$KUBECONFIG" --interval 0.5 --log "$dir/overcommit.log" --state "$dir/overcommit.json" &
  checker_pid=$!
  eventually 15 "the over-commit checker polls the cluster every 0.5 s (pid $checker_pid)" \
    bash -c "[[ -s '$dir/overcommit.json' ]] && ! grep -Eq '\"polls\": ?0,' '$dir/overcommit.json'"
}

# overcommit_verdict DIR MIN_POLLS: stops the checker overcommit_watch started, and checks it ran
# throughout (at least MIN_POLLS polls, errors at most a tenth) and saw no node over-committed
overcommit_verdict() {
  local alive=0 polls errors violations
  kill -0 "$checker_pid" 2>/dev/null && alive=1
  stop_process "$checker_pid"
  read -r polls errors violations < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s["polls"], s["errors"], s["violations"])' "$1/overcommit.json")
  check "the over-commit checker ran through the test ($polls polls, $errors errors)" \
    test "$alive" = 1 -a "$polls" -ge "$2" -a $(( errors * 10 )) -le "$polls"
  [[ $violations == 0 ]] || sed 's/^/       /' "$1/overcommit.log" >&2
  check "no node had more requested than allocatable in $polls polls" test "$violations" = 0
}

# rust_e2e TEST WHAT MIN_POLLS [OBJECT...]: the whole of an e2e test written in Rust,
# crates/muster-harness/tests/TEST.rs (WHAT says what it checks): muster up and, for the whole
# test, overcommit_watch with the Rust checker (`muster-harness overcommit`); the Rust test against
# the cluster as admin (MUSTER_E2E_KUBECONFIG), with muster's own identity at hand
# (MUSTER_E2E_CONTROLLER_KUBECONFIG) and MUSTER_BIN; then overcommit_verdict with MIN_POLLS. Its tests run one at a time: they share the nodes. On exit,
# however it ends: the checker and muster stop, and OBJECTs (kubectl's TYPE/NAME, e.g.
# namespace/NAME, for what a failed test leaves) are deleted.
rust_e2e() {
  local test=$1 what=$2 min_polls=$3
  shift 3
  echo "test-muster-$test" >&2
  rust_e2e_tmp=$(mktemp -d)
  rust_e2e_leftovers=("$@")
  checker_pid=""
  trap rust_e2e_cleanup EXIT
  trap 'exit 130' INT TERM
  resolve_harness_bin
  overcommit_watch "$rust_e2e_tmp" "$MUSTER_HARNESS_BIN" overcommit
  muster_up
  check "$what" env RUST_BACKTRACE=0 MUSTER_E2E_KUBECONFIG="$KUBECONFIG" MUSTER_E2E_CONTROLLER_KUBECONFIG="$muster_dir/controller.kubeconfig" \
    MUSTER_BIN="$MUSTER_BIN" cargo test -q --workspace --test "$test" -- --test-threads=1 --nocapture
  overcommit_verdict "$rust_e2e_tmp" "$min_polls"
}
rust_e2e_cleanup() {
  stop_process "$checker_pid"
  muster_down
  (( ${#rust_e2e_leftovers[@]} == 0 )) || k delete "${rust_e2e_leftovers[@]}" --wait=false --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$rust_e2e_tmp"
}
