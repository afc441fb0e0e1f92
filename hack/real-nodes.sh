#!/usr/bin/env bash
# Real nodes beside the KWOK ones: kubelets that admit pods and containers that run.
#
#   hack/real-nodes.sh up [N]     start N (default 2) real nodes on the running control plane
#   hack/real-nodes.sh down       stop them, their containers and their networks; remove their state
#   hack/real-nodes.sh import ARCHIVE   load an image tarball into every real node's containerd
#
# Each node, named muster-real-<i>, is a kubelet of the pinned Kubernetes version with its own
# containerd (built from its Go module), root directory, cgroup root, ports, pod log directory and
# bridge network, all on this one machine. A kubelet kills every pod its runtime holds that the
# apiserver did not give it, so two kubelets cannot share one containerd.
#
# What a kubelet needs here, and why (docs/control-plane.md):
#   - cgroup v1 (this machine mounts v1 controllers): failCgroupV1: false, driver cgroupfs;
#   - no swap accounting: failSwapOn: false;
#   - runc from Debian's packages (/usr/sbin/runc), the CNI plugins bridge, host-local and
#     loopback from containernetworking-plugins (/usr/lib/cni), iptables for the bridge's masquerade;
#   - IPv4 forwarding on, for pod traffic between bridges and out of the machine;
#   - images from a local archive (hack/node-image.sh): no registry can be reached, so pods use
#     imagePullPolicy: Never and the sandbox image is pinned to the same local image.
#
# Nodes are labelled muster.dev/real-node=true and get a share of the machine: each advertises
# $REAL_NODE_CPU CPU and $REAL_NODE_MEMORY of memory as allocatable (the rest is reserved), so tests
# can fill one and see the kubelet refuse what does not fit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dir=$MUSTER_CLUSTER_DIR
nodes_dir=$dir/real-nodes
pki=$dir/pki
KUBECTL=$K8S_BIN/kubectl
REAL_NODE_CPU=${REAL_NODE_CPU:-1500m}
REAL_NODE_MEMORY=${REAL_NODE_MEMORY:-2Gi}
CNI_BIN=${CNI_BIN:-/usr/lib/cni}
RUNC=${RUNC:-/usr/sbin/runc}

# --- helpers -----------------------------------------------------------------------------
# ours PIDFILE NEEDLE: the recorded pid still runs a command line holding NEEDLE, the node's own
# config file (pids get reused; the binary alone would not tell one node's process from another's).
ours() {
  local pid
  read -r pid 2>/dev/null < "$1" || return 1
  [[ -n $pid && -d /proc/$pid ]] && grep -qF "$2" "/proc/$pid/cmdline" 2>/dev/null
}
# stop_pid PIDFILE NEEDLE: SIGTERM, SIGKILL after 10 s.
stop_pid() {
  local pidfile=$1 needle=$2 pid
  ours "$pidfile" "$needle" || { rm -f "$pidfile"; return 0; }
  read -r pid < "$pidfile"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do ours "$pidfile" "$needle" || break; sleep 0.1; done
  ours "$pidfile" "$needle" && kill -KILL "$pid" 2>/dev/null
  rm -f "$pidfile"
}
# spawn PIDFILE LOGFILE CMD...: CMD in a session of its own, logging to LOGFILE, with the pid that
# runs CMD in PIDFILE (setsid forks when its caller leads a process group, so $! would be wrong).
spawn() {
  local pidfile=$1 logfile=$2; shift 2
  rm -f "$pidfile"
  # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "$@" >>"$logfile" 2>&1 </dev/null &
  for _ in $(seq 50); do [[ -s $pidfile ]] && return 0; sleep 0.1; done
  die "$1 did not start; log: $logfile"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])'; }

# --- down --------------------------------------------------------------------------------
down() {
  [[ -d $nodes_dir ]] || { log "no real nodes in $nodes_dir"; return 0; }
  local node_dir name
  stop_pid "$nodes_dir/kube-proxy.pid" "$nodes_dir/kube-proxy.yaml"
  # kube-proxy's rules would send Service traffic to pods that are gone.
  [[ -f $nodes_dir/kube-proxy.yaml ]] && "$NODE_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  for node_dir in "$nodes_dir"/muster-real-*/; do
    [[ -d $node_dir ]] || continue
    node_dir=${node_dir%/}
    name=$(basename "$node_dir")
    stop_pid "$node_dir/kubelet.pid" "$node_dir/kubelet.yaml"
    # The kubelet is gone; stop its pods' containers through the runtime so no shim outlives it.
    if ours "$node_dir/containerd.pid" "$node_dir/containerd.toml"; then
      local sock=$node_dir/run/containerd.sock
      for task in $("$CONTAINERD_BIN/ctr" --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
        "$CONTAINERD_BIN/ctr" --address "$sock" -n k8s.io tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
      done
      sleep 1
      for task in $("$CONTAINERD_BIN/ctr" --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
        "$CONTAINERD_BIN/ctr" --address "$sock" -n k8s.io tasks delete -f "$task" >/dev/null 2>&1 || true
      done
    fi
    stop_pid "$node_dir/containerd.pid" "$node_dir/containerd.toml"
    # Whatever still runs with the node's directory on its command line (a shim that outlived a
    # containerd killed hard, a process whose pid file was lost) holds its mounts: end it.
    pkill -KILL -f -- "$node_dir/" 2>/dev/null || true
    # Mounts the kubelet and containerd made under the node's directories (overlay rootfs, shm,
    # netns, volumes), deepest first.
    grep -F " $node_dir" /proc/self/mountinfo | awk '{print $5}' | sort -r |
      while read -r m; do umount -l "$m" 2>/dev/null || true; done
    ip link del "mreal-${name##*-}" 2>/dev/null || true
    local cg
    for cg in /sys/fs/cgroup/*/"$name"; do
      [[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
    "$KUBECTL" --kubeconfig "$dir/kubeconfig" delete node "$name" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    # Its containers are gone, so are its pods: removed now rather than by the pod garbage
    # collector a minute later, which would hold their namespaces in Terminating until then.
    "$KUBECTL" --kubeconfig "$dir/kubeconfig" delete pods --all-namespaces --field-selector "spec.nodeName=$name" \
      --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    # Keep the logs beside the control plane's, for a failed test to be read after.
    if [[ -d $dir/logs ]]; then
      local f
      for f in "$node_dir"/logs/*.log; do [[ -f $f ]] && mv "$f" "$dir/logs/$name-$(basename "$f")"; done
    fi
    rm -rf "$node_dir"
    log "real node $name stopped"
  done
  [[ -f $nodes_dir/kube-proxy.log && -d $dir/logs ]] && mv "$nodes_dir/kube-proxy.log" "$dir/logs/real-nodes-kube-proxy.log"
  rm -rf "$nodes_dir"
}

# --- up ----------------------------------------------------------------------------------
up() {
  local count=${1:-2}
  [[ $count =~ ^[1-9][0-9]?$ ]] || die "N must be a number of nodes from 1 to 99, got '$count'"
  [[ -f $dir/kubeconfig && -f $pki/ca.key ]] || die "no control plane in $dir; run hack/cluster-up.sh first"
  "$KUBECTL" --kubeconfig "$dir/kubeconfig" get --raw /readyz >/dev/null 2>&1 || die "the control plane in $dir is not ready"
  local b
  for b in "$NODE_BIN/kubelet" "$NODE_BIN/kube-proxy" "$CONTAINERD_BIN/containerd" "$CONTAINERD_BIN/containerd-shim-runc-v2" "$CONTAINERD_BIN/ctr" "$TOOLS_BIN/muster-pod"; do
    [[ -x $b ]] || die "missing $b; run hack/cluster-build.sh with MUSTER_REAL_NODES=1"
  done
  [[ -x $RUNC ]] || die "no runc at $RUNC (Debian package runc, or set RUNC)"
  for b in bridge host-local loopback; do
    [[ -x $CNI_BIN/$b ]] || die "no CNI plugin $CNI_BIN/$b (Debian package containernetworking-plugins, or set CNI_BIN)"
  done
  command -v iptables >/dev/null || die "iptables is required (the bridge network masquerades pod traffic)"
  [[ $(id -u) == 0 ]] || die "real nodes need root: a kubelet and containerd manage cgroups, mounts and network namespaces"
  local cgroup_fs
  cgroup_fs=$(stat -fc %T /sys/fs/cgroup)
  local fail_cgroup_v1=true
  [[ $cgroup_fs != cgroup2fs ]] && fail_cgroup_v1=false

  sysctl -qw net.ipv4.ip_forward=1
  mkdir -p "$nodes_dir"
  local image=$nodes_dir/pod-image.tar
  "$hack_dir/node-image.sh" "$image"
  local node_ip
  node_ip=$(host_ipv4)
  [[ -n $node_ip ]] || die "no global IPv4 address on this machine for the kubelets' node IP"

  local i
  for i in $(seq 1 "$count"); do
    start_node "muster-real-$i" "$i" "$node_ip" "$image" "$fail_cgroup_v1"
  done
  for i in $(seq 1 "$count"); do
    wait_ready "muster-real-$i"
  done
  start_kube_proxy muster-real-1
  log "$count real nodes Ready (node IP $node_ip, cgroup ${cgroup_fs/tmpfs/v1})"
}

# start_node NAME INDEX NODE_IP IMAGE FAIL_CGROUP_V1
start_node() {
  local name=$1 index=$2 node_ip=$3 image=$4 fail_cgroup_v1=$5
  local node_dir=$nodes_dir/$name
  local run=$node_dir/run sock=$node_dir/run/containerd.sock
  local bridge=mreal-$index subnet=10.88.$index.0/24
  if ours "$node_dir/kubelet.pid" "$node_dir/kubelet.yaml"; then
    log "real node $name already runs"
    return 0
  fi
  rm -rf "$node_dir"
  mkdir -p "$run" "$node_dir/containerd" "$node_dir/kubelet" "$node_dir/pod-logs" "$node_dir/cni" "$node_dir/logs"

  # Credentials: the Node authorizer knows a kubelet by system:node:<name> in group system:nodes.
  client_kubeconfig "$node_dir/kubelet" "/O=system:nodes/CN=system:node:$name"

  # The pod network: a bridge per node with its own /24, masqueraded on the way out.
  cat > "$node_dir/cni/10-muster.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "muster-$name",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$subnet"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$node_dir/cni/ipam"}
    },
    {"type": "loopback"}
  ]
}
EOF

  # The kubelet asks for negative OOM scores (-998 for a sandbox), which needs CAP_SYS_RESOURCE;
  # without it (a sandboxed machine), containerd keeps scores at or above its own.
  local restrict_oom=false
  (echo -1 > /proc/self/oom_score_adj) 2>/dev/null || restrict_oom=true
  cat > "$node_dir/containerd.toml" <<EOF
version = 3
root = '$node_dir/containerd'
state = '$run/containerd-state'
[grpc]
  address = '$sock'
[ttrpc]
  address = '$sock.ttrpc'
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '$NODE_IMAGE'
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = $restrict_oom
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '$RUNC'
          Root = '$run/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$CNI_BIN']
      conf_dir = '$node_dir/cni'
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
EOF
  # containerd finds its shim on PATH.
  PATH=$CONTAINERD_BIN:$PATH spawn "$node_dir/containerd.pid" "$node_dir/logs/containerd.log" \
    "$CONTAINERD_BIN/containerd" --config "$node_dir/containerd.toml"
  local deadline=$(( $(date +%s) + 30 ))
  until "$CONTAINERD_BIN/ctr" --address "$sock" version >/dev/null 2>&1; do
    ours "$node_dir/containerd.pid" "$node_dir/containerd.toml" ||
      { tail -n 20 "$node_dir/logs/containerd.log" >&2; die "containerd of $name exited; log: $node_dir/logs/containerd.log"; }
    (( $(date +%s) < deadline )) || die "containerd of $name not ready after 30s; log: $node_dir/logs/containerd.log"
    sleep 0.2
  done
  "$CONTAINERD_BIN/ctr" --address "$sock" -n k8s.io images import "$image" >>"$node_dir/logs/containerd.log" 2>&1 ||
    die "importing $image into $name's containerd failed; log: $node_dir/logs/containerd.log"

  make_cgroup_root "$name"
  local port healthz_port
  port=$(free_port); healthz_port=$(free_port)
  cat > "$node_dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$sock
imageServiceEndpoint: unix://$sock
cgroupDriver: cgroupfs
cgroupRoot: /$name
failCgroupV1: $fail_cgroup_v1
failSwapOn: false
podLogsDir: $node_dir/pod-logs
resolvConf: /etc/resolv.conf
maxPods: 30
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
# Allocatable is what remains after the reservation: a share of the machine per node.
systemReserved: {cpu: "$(reserve cpu)", memory: "$(reserve memory)"}
enforceNodeAllocatable: [pods]
EOF
  spawn "$node_dir/kubelet.pid" "$node_dir/logs/kubelet.log" \
    "$NODE_BIN/kubelet" --config="$node_dir/kubelet.yaml" --kubeconfig="$node_dir/kubelet.kubeconfig" \
    --root-dir="$node_dir/kubelet" --cert-dir="$node_dir/kubelet/pki" \
    --hostname-override="$name" --node-ip="$node_ip" \
    --node-labels=muster.dev/real-node=true \
    --v="${REAL_NODE_KUBELET_V:-1}"
  log "real node $name: kubelet on $node_ip:$port, containerd at $sock, pods in $subnet"
}

# client_kubeconfig BASE SUBJECT: a client certificate for SUBJECT signed by the cluster's CA
# (BASE.crt, BASE.key) and a kubeconfig using it (BASE.kubeconfig).
client_kubeconfig() {
  local base=$1 subject=$2 server
  openssl ecparam -name prime256v1 -genkey -noout -out "$base.key" 2>/dev/null
  openssl req -new -key "$base.key" -subj "$subject" -out "$base.csr" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > "$base.ext"
  openssl x509 -req -in "$base.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$base.ext" -out "$base.crt" 2>/dev/null
  rm -f "$base.csr" "$base.ext"
  server=$("$KUBECTL" --kubeconfig "$dir/kubeconfig" config view -o jsonpath='{.clusters[0].cluster.server}')
  cat > "$base.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: client
  user:
    client-certificate: $base.crt
    client-key: $base.key
contexts:
- name: client
  context: {cluster: muster, user: client}
current-context: client
EOF
}

# start_kube_proxy NODE_NAME: one kube-proxy for the machine (every real node shares its network
# namespace), in iptables mode, so that Services reach pods on real nodes and pods reach the
# apiserver through the Service kubernetes. The user system:kube-proxy holds the built-in role
# system:node-proxier.
start_kube_proxy() {
  local node=$1
  ours "$nodes_dir/kube-proxy.pid" "$nodes_dir/kube-proxy.yaml" && return 0
  # Pod-to-Service traffic between pods on one bridge passes the bridge's netfilter hooks.
  [[ -f /proc/sys/net/bridge/bridge-nf-call-iptables ]] && sysctl -qw net.bridge.bridge-nf-call-iptables=1
  client_kubeconfig "$nodes_dir/kube-proxy" "/CN=system:kube-proxy"
  cat > "$nodes_dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $nodes_dir/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: 10.88.0.0/16
hostnameOverride: $node
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
# Leave the machine's conntrack table as it is.
conntrack: {maxPerCore: 0}
EOF
  spawn "$nodes_dir/kube-proxy.pid" "$nodes_dir/kube-proxy.log" \
    "$NODE_BIN/kube-proxy" --config="$nodes_dir/kube-proxy.yaml" --v=1
}

# make_cgroup_root NAME: the node's cgroup root in every v1 hierarchy (the kubelet expects it to
# exist); a v1 cpuset starts with no CPUs and no memory nodes, so it takes its parent's.
make_cgroup_root() {
  local name=$1 hierarchy
  [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] && return 0
  for hierarchy in /sys/fs/cgroup/*/; do
    [[ $hierarchy == */unified/ ]] && continue
    mkdir -p "$hierarchy$name"
  done
  local cpuset=/sys/fs/cgroup/cpuset
  if [[ -f $cpuset/cpuset.cpus ]]; then
    cat "$cpuset/cpuset.cpus" > "$cpuset/$name/cpuset.cpus"
    cat "$cpuset/cpuset.mems" > "$cpuset/$name/cpuset.mems"
  fi
}

# reserve cpu|memory: what to reserve so that allocatable is REAL_NODE_CPU / REAL_NODE_MEMORY.
reserve() {
  python3 - "$1" "$REAL_NODE_CPU" "$REAL_NODE_MEMORY" <<'PY'
import os, sys
what, cpu, mem = sys.argv[1:]
def cpu_milli(q):
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)
def mem_bytes(q):
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for u, f in units.items():
        if q.endswith(u):
            return int(q[:-2]) * f
    return int(q)
if what == "cpu":
    total = os.cpu_count() * 1000
    want = cpu_milli(cpu)
    if want > total:
        sys.exit(f"REAL_NODE_CPU={cpu} is more than this machine's {os.cpu_count()} CPUs")
    print(f"{total - want}m")
else:
    total = int(open("/proc/meminfo").readline().split()[1]) * 1024
    want = mem_bytes(mem)
    # The kubelet subtracts the hard eviction threshold (100Mi) from allocatable too.
    reserved = total - want - 100 * 2**20
    if reserved < 0:
        sys.exit(f"REAL_NODE_MEMORY={mem} is more than this machine's memory")
    print(f"{reserved // 2**10}Ki")
PY
}

# wait_ready NAME: the node registered and Ready within 90 s.
wait_ready() {
  local name=$1 node_dir=$nodes_dir/$1
  local deadline=$(( $(date +%s) + 90 ))
  until [[ $("$KUBECTL" --kubeconfig "$dir/kubeconfig" get node "$name" \
            -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; do
    ours "$node_dir/kubelet.pid" "$node_dir/kubelet.yaml" ||
      { tail -n 30 "$node_dir/logs/kubelet.log" >&2; die "kubelet of $name exited; log: $node_dir/logs/kubelet.log"; }
    (( $(date +%s) < deadline )) ||
      { tail -n 30 "$node_dir/logs/kubelet.log" >&2; die "node $name not Ready after 90s; log: $node_dir/logs/kubelet.log"; }
    sleep 1
  done
}

# import ARCHIVE: an image tarball (hack/image.sh's, say) into every real node's containerd, for
# pods that name it with imagePullPolicy IfNotPresent or Never.
import_image() {
  local archive=$1 node_dir n=0
  [[ -f $archive ]] || die "no image archive at $archive"
  for node_dir in "$nodes_dir"/muster-real-*/; do
    [[ -d $node_dir ]] || continue
    node_dir=${node_dir%/}
    "$CONTAINERD_BIN/ctr" --address "$node_dir/run/containerd.sock" -n k8s.io images import "$archive" \
      >>"$node_dir/logs/containerd.log" 2>&1 || die "importing $archive into $(basename "$node_dir") failed"
    n=$((n + 1))
  done
  (( n )) || die "no real nodes run; hack/real-nodes.sh up first"
  log "imported $(basename "$archive") into $n real nodes"
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  import) (( $# == 2 )) || die "usage: hack/real-nodes.sh import ARCHIVE"; import_image "$2" ;;
  *) die "usage: hack/real-nodes.sh up [N] | down | import ARCHIVE" ;;
esac
