#!/usr/bin/env bash
# Start a real Kubernetes control plane on loopback, with KWOK fake nodes:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, muster-gang-ready.
#
#   hack/cluster-up.sh [CLUSTER_FILE]     (default: scenarios/clusters/seed-deadlock.yaml)
#
# CLUSTER_FILE is a cluster description (docs/cluster-description.md); its nodes become
# KWOK nodes. Idempotent: when the cluster is already up, only the node set is brought in
# line with CLUSTER_FILE. State (PKI, etcd data, logs, pids, kubeconfig) lives in
# $MUSTER_CLUSTER_DIR (default ~/.cache/muster/cluster). Stop with hack/cluster-down.sh.
# MUSTER_APISERVER_PROFILING=1 serves kube-apiserver's /debug/pprof, for a CPU profile of a run
# (docs/benchmarks.md). See docs/control-plane.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cluster_file=${1:-${MUSTER_CLUSTER_FILE:-$repo_dir/scenarios/clusters/seed-deadlock.yaml}}
[[ -f $cluster_file ]] || die "cluster description not found: $cluster_file"
cluster_file=$(cd "$(dirname "$cluster_file")" && pwd)/$(basename "$cluster_file")

dir=$MUSTER_CLUSTER_DIR
apiserver_profiling=false
[[ ${MUSTER_APISERVER_PROFILING:-0} == 1 ]] && apiserver_profiling=true
pki=$dir/pki
logs=$dir/logs
run=$dir/run
kubeconfig=$dir/kubeconfig
KUBECTL=$K8S_BIN/kubectl
t_start=$(date +%s.%N)
# The native Workload API (KEP-4671: Workload and PodGroup in scheduling.k8s.io/v1beta1, beta and
# off by default in Kubernetes 1.37) and its gang scheduling: one feature gate, GenericWorkload,
# which since 1.37 also covers the removed GangScheduling and WorkloadAwarePreemption gates. It
# serves the API (kube-apiserver, with the beta group version switched on), enables the
# GangScheduling plugin (kube-scheduler) and the PodGroup protection controller
# (kube-controller-manager), so all three get it.
# Gangs of gangs too: the alpha CompositePodGroup gate (CompositePodGroup in
# scheduling.k8s.io/v1alpha3, PodGroups' parentCompositePodGroupName), which needs the alpha
# TopologyAwareWorkloadScheduling (topology constraints on PodGroups) beside it.
# MUSTER_EXTRA_FEATURE_GATES (comma-separated Name=true) adds gates to all three.
feature_gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true
feature_gates+=${MUSTER_EXTRA_FEATURE_GATES:+,$MUSTER_EXTRA_FEATURE_GATES}
runtime_config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true

for tool in openssl curl python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done

# --- binaries ---------------------------------------------------------------------------
need_build=0
for b in "$K8S_BIN"/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl} \
         "$ETCD_BIN/etcd" "$KWOK_BIN/kwok" "$TOOLS_BIN/muster-gang-ready"; do
  [[ -x $b ]] || need_build=1
done
if (( need_build )); then
  log "some binaries are missing; running hack/cluster-build.sh"
  "$hack_dir/cluster-build.sh"
fi

# --- already running? -------------------------------------------------------------------
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok muster-gang-ready)

pid_alive() { # pid_alive NAME: the recorded pid runs the recorded binary
  local f=$run/$1.pid pid
  [[ -f $f ]] || return 1
  read -r pid < "$f" || return 1
  [[ -n $pid && -d /proc/$pid ]] || return 1
  grep -qF "$(cat "$run/$1.bin" 2>/dev/null)" "/proc/$pid/cmdline" 2>/dev/null
}
# pid_running NAME: the pid just started is still there. While a process execs, its cmdline can
# read empty for a moment, so a startup wait checks the pid alone (it cannot be reused that soon).
pid_running() { local pid; read -r pid < "$run/$1.pid" 2>/dev/null && [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; }

all_alive=1
for c in "${components[@]}"; do pid_alive "$c" || all_alive=0; done
if (( all_alive )) && "$KUBECTL" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; then
  log "cluster already running (state in $dir)"
  "$hack_dir/cluster-nodes.sh" "$cluster_file"
  echo "kubeconfig: $kubeconfig"
  echo "export KUBECONFIG=$kubeconfig"
  exit 0
fi
if [[ -d $run ]]; then
  log "stopping the remains of a previous cluster"
  "$hack_dir/cluster-down.sh" >/dev/null 2>&1 || true
fi

# --- ports ------------------------------------------------------------------------------
port_free() { # port_free PORT: nothing listens on 127.0.0.1:PORT and it can be bound
  python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}
pick_port() { # pick_port ENVVAR: the port named by $ENVVAR if set (must be free), else any free one
  local var=$1 want=${!1:-}
  if [[ -n $want ]]; then
    port_free "$want" || die "port $want (from \$$var) is already in use on 127.0.0.1; free it or choose another"
    echo "$want"
  else
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
  fi
}
declare -A port
port[etcd]=$(pick_port MUSTER_ETCD_PORT)
port[etcd-peer]=$(pick_port MUSTER_ETCD_PEER_PORT)
port[apiserver]=$(pick_port MUSTER_APISERVER_PORT)
port[controller-manager]=$(pick_port MUSTER_CONTROLLER_MANAGER_PORT)
port[scheduler]=$(pick_port MUSTER_SCHEDULER_PORT)
port[kwok]=$(pick_port MUSTER_KWOK_PORT)
# Two picks of "any free port" may coincide; make them distinct.
declare -A seen
for k in "${!port[@]}"; do
  while [[ -n ${seen[${port[$k]}]:-} ]]; do port[$k]=$(pick_port __none__); done
  seen[${port[$k]}]=1
done

# --- fresh state ------------------------------------------------------------------------
rm -rf "$pki" "$run" "$dir/etcd-data" "$dir/config" "$kubeconfig"
if [[ -d $logs ]]; then rm -rf "$dir/logs.previous"; mv "$logs" "$dir/logs.previous"; fi
mkdir -p "$pki" "$logs" "$run" "$dir/config"
chmod 700 "$dir" "$pki"
{
  for k in "${!port[@]}"; do key=${k//-/_}; echo "MUSTER_PORT_${key^^}=${port[$k]}"; done
} | sort > "$dir/ports.env"

# Pods on real nodes (hack/real-nodes.sh) reach the apiserver through the Service `kubernetes`
# (10.96.0.1), whose endpoint must be an address they can route to: this machine's own. Without
# one, the apiserver listens on loopback only and the Service has no endpoint.
host_ip=$(host_ipv4)

# --- PKI: a throwaway CA, serving and client certificates, service-account keys ---------
log "generating a throwaway CA and certificates in $pki"
ossl() { openssl "$@" 2>>"$logs/openssl.log"; }
ossl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key"
ossl req -x509 -new -key "$pki/ca.key" -sha256 -days 3650 -subj "/CN=muster-harness-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$pki/ca.crt"

# cert NAME SUBJECT USAGE [SAN]: an ECDSA key and a CA-signed certificate
cert() {
  local name=$1 subj=$2 usage=$3 san=${4:-}
  ossl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key"
  ossl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } > "$pki/$name.ext"
  ossl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt"
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}
cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,IP:10.96.0.1,${host_ip:+IP:$host_ip,}DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=muster-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kwok "/O=system:masters/CN=kwok" "serverAuth,clientAuth" "IP:127.0.0.1,DNS:localhost"
cert gang-ready "/O=system:masters/CN=muster-gang-ready" clientAuth
cert controller-manager-serving "/CN=kube-controller-manager" serverAuth "IP:127.0.0.1,DNS:localhost"
cert scheduler-serving "/CN=kube-scheduler" serverAuth "IP:127.0.0.1,DNS:localhost"
# Front-proxy (request-header) CA and client: unused by the harness, but without them the
# apiserver publishes no request-header CA and every delegating component logs errors.
ossl ecparam -name prime256v1 -genkey -noout -out "$pki/front-proxy-ca.key"
ossl req -x509 -new -key "$pki/front-proxy-ca.key" -sha256 -days 3650 -subj "/CN=muster-harness-front-proxy-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$pki/front-proxy-ca.crt"
ossl ecparam -name prime256v1 -genkey -noout -out "$pki/front-proxy-client.key"
ossl req -new -key "$pki/front-proxy-client.key" -subj "/CN=front-proxy-client" -out "$pki/front-proxy-client.csr"
printf 'extendedKeyUsage=clientAuth\n' > "$pki/front-proxy-client.ext"
ossl x509 -req -in "$pki/front-proxy-client.csr" -CA "$pki/front-proxy-ca.crt" -CAkey "$pki/front-proxy-ca.key" \
  -CAcreateserial -days 3650 -sha256 -extfile "$pki/front-proxy-client.ext" -out "$pki/front-proxy-client.crt"
rm -f "$pki/front-proxy-client.csr" "$pki/front-proxy-client.ext"
ossl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key"
ossl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
chmod 600 "$pki"/*.key

server=https://127.0.0.1:${port[apiserver]}
# kubeconfig FILE CERTNAME USER
write_kubeconfig() {
  local file=$1 certname=$2 user=$3
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster-local
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $pki/$certname.crt
    client-key: $pki/$certname.key
contexts:
- name: muster-local
  context: {cluster: muster-local, user: $user}
current-context: muster-local
EOF
}
write_kubeconfig "$kubeconfig" admin muster-admin
write_kubeconfig "$dir/config/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
write_kubeconfig "$dir/config/scheduler.kubeconfig" scheduler system:kube-scheduler
write_kubeconfig "$dir/config/kwok.kubeconfig" kwok kwok
write_kubeconfig "$dir/config/gang-ready.kubeconfig" gang-ready muster-gang-ready

# --- processes ----------------------------------------------------------------------------
# start NAME BINARY ARGS...: run in its own session, log to logs/NAME.log, pid to run/NAME.pid
start() {
  local name=$1 bin=$2; shift 2
  echo "$bin $*" > "$run/$name.cmd"
  echo "$bin" > "$run/$name.bin"
  setsid "$bin" "$@" >>"$logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$run/$name.pid"
}
# exit_status NAME: sets $how_gone to how a component that died is gone: its exit code, or the
# signal that killed it (a death by SIGKILL leaves nothing in its log). Not in a subshell: only
# this shell can `wait` for its own children.
exit_status() {
  local pid code=0
  how_gone="no pid recorded"
  read -r pid < "$run/$1.pid" 2>/dev/null || return 0
  if [[ -d /proc/$pid ]]; then
    how_gone="pid $pid now runs: $(tr '\0' ' ' < "/proc/$pid/cmdline" | cut -c1-100)"
    return 0
  fi
  wait "$pid" 2>/dev/null || code=$?
  if (( code > 128 )); then how_gone="pid $pid killed by signal $((code - 128))"; else how_gone="pid $pid exit code $code"; fi
}
# wait_for NAME SECONDS CMD...: poll CMD until it succeeds; fail with the log's tail.
wait_for() {
  local name=$1 secs=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if ! pid_running "$name"; then
      tail -n 30 "$logs/$name.log" >&2 || true
      exit_status "$name"
      "$hack_dir/cluster-down.sh" >/dev/null 2>&1 || true
      die "$name exited during startup ($how_gone); log: $logs/$name.log"
    fi
    if (( $(date +%s) > deadline )); then
      tail -n 30 "$logs/$name.log" >&2 || true
      "$hack_dir/cluster-down.sh" >/dev/null 2>&1 || true
      die "$name not ready after ${secs}s; log: $logs/$name.log"
    fi
    sleep 0.2
  done
}

log "starting etcd on 127.0.0.1:${port[etcd]}"
start etcd "$ETCD_BIN/etcd" \
  --name=muster --data-dir="$dir/etcd-data" \
  --listen-client-urls="http://127.0.0.1:${port[etcd]}" --advertise-client-urls="http://127.0.0.1:${port[etcd]}" \
  --listen-peer-urls="http://127.0.0.1:${port[etcd-peer]}" --initial-advertise-peer-urls="http://127.0.0.1:${port[etcd-peer]}" \
  --initial-cluster="muster=http://127.0.0.1:${port[etcd-peer]}" \
  --unsafe-no-fsync --auto-compaction-retention=1 --quota-backend-bytes=4294967296 --log-level=warn
wait_for etcd 30 curl -fsS "http://127.0.0.1:${port[etcd]}/health"

if [[ -n $host_ip ]]; then
  listen=(--bind-address=0.0.0.0 --advertise-address="$host_ip" --endpoint-reconciler-type=lease)
else
  listen=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
fi
log "starting kube-apiserver on $server${host_ip:+ (and $host_ip for pods)}"
start kube-apiserver "$K8S_BIN/kube-apiserver" \
  "${listen[@]}" --secure-port="${port[apiserver]}" \
  --etcd-servers="http://127.0.0.1:${port[etcd]}" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --requestheader-client-ca-file="$pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$pki/front-proxy-client.crt" --proxy-client-key-file="$pki/front-proxy-client.key" \
  --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP,Hostname \
  --authorization-mode=Node,RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --api-audiences=https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range=10.96.0.0/16 \
  --allow-privileged=true \
  --feature-gates="$feature_gates" --runtime-config="$runtime_config" \
  --max-requests-inflight=2000 --max-mutating-requests-inflight=1000 \
  --profiling="$apiserver_profiling" --v=1
wait_for kube-apiserver 90 curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$server/readyz"

log "starting kube-controller-manager and kube-scheduler"
start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig="$dir/config/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$dir/config/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$dir/config/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="${port[controller-manager]}" \
  --tls-cert-file="$pki/controller-manager-serving.crt" --tls-private-key-file="$pki/controller-manager-serving.key" \
  --client-ca-file="$pki/ca.crt" \
  --root-ca-file="$pki/ca.crt" --service-account-private-key-file="$pki/sa.key" \
  --use-service-account-credentials=true \
  --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --leader-elect=false \
  --kube-api-qps=500 --kube-api-burst=1000 \
  --concurrent-job-syncs=10 \
  --feature-gates="$feature_gates" \
  --profiling=false --v=1
start kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig="$dir/config/scheduler.kubeconfig" \
  --authentication-kubeconfig="$dir/config/scheduler.kubeconfig" \
  --authorization-kubeconfig="$dir/config/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="${port[scheduler]}" \
  --tls-cert-file="$pki/scheduler-serving.crt" --tls-private-key-file="$pki/scheduler-serving.key" \
  --client-ca-file="$pki/ca.crt" \
  --leader-elect=false \
  --kube-api-qps=500 --kube-api-burst=1000 \
  --feature-gates="$feature_gates" \
  --profiling=false --v=1

log "starting kwok (fake kubelets) and muster-gang-ready"
start kwok "$KWOK_BIN/kwok" \
  --config="$hack_dir/kwok/stages.yaml" \
  --kubeconfig="$dir/config/kwok.kubeconfig" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip=127.0.0.1 --node-port="${port[kwok]}" \
  --server-address="127.0.0.1:${port[kwok]}" \
  --tls-cert-file="$pki/kwok.crt" --tls-private-key-file="$pki/kwok.key" \
  --cidr=10.244.0.1/16 \
  --node-lease-duration-seconds=40
start muster-gang-ready "$TOOLS_BIN/muster-gang-ready" --kubeconfig="$dir/config/gang-ready.kubeconfig"

wait_for kube-controller-manager 60 curl -fsSk "https://127.0.0.1:${port[controller-manager]}/healthz"
wait_for kube-scheduler 60 curl -fsSk "https://127.0.0.1:${port[scheduler]}/healthz"
# The service-account controller creates default/default; pods need it.
wait_for kube-controller-manager 60 "$KUBECTL" --kubeconfig "$kubeconfig" -n default get serviceaccount default
for c in kwok muster-gang-ready; do pid_alive "$c" || { tail -n 30 "$logs/$c.log" >&2; "$hack_dir/cluster-down.sh" >/dev/null 2>&1 || true; die "$c exited; log: $logs/$c.log"; }; done

"$hack_dir/cluster-nodes.sh" "$cluster_file"

elapsed=$(python3 -c "import time; print(f'{time.time()-$t_start:.1f}')")
log "control plane up in ${elapsed}s; logs in $logs"
echo "kubeconfig: $kubeconfig"
echo "export KUBECONFIG=$kubeconfig"
