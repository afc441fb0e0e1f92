# Shared settings for the control-plane harness scripts (sourced, not run).
# Everything here can be overridden from the environment.
hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(dirname "$hack_dir")
# shellcheck source=versions.env
. "$hack_dir/versions.env"

MUSTER_CACHE=${MUSTER_CACHE:-$HOME/.cache/muster}
K8S_BIN=${K8S_BIN:-$MUSTER_CACHE/k8s-$K8S_VERSION}
ETCD_BIN=${ETCD_BIN:-$MUSTER_CACHE/etcd-$ETCD_VERSION}
KWOK_BIN=${KWOK_BIN:-$MUSTER_CACHE/kwok-$KWOK_VERSION}
TOOLS_BIN=${TOOLS_BIN:-$MUSTER_CACHE/harness-tools}
# Real nodes (hack/real-nodes.sh): the kubelet and kube-proxy, and containerd with its shim and ctr.
NODE_BIN=${NODE_BIN:-$MUSTER_CACHE/k8s-node-$K8S_VERSION}
CONTAINERD_BIN=${CONTAINERD_BIN:-$MUSTER_CACHE/containerd-$CONTAINERD_VERSION}
# The one image real nodes run, as sandbox and as workload (hack/node-image.sh).
NODE_IMAGE=${NODE_IMAGE:-muster.local/pod:v1}
MUSTER_CLUSTER_DIR=${MUSTER_CLUSTER_DIR:-$MUSTER_CACHE/cluster}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# host_ipv4: this machine's first global IPv4 address (empty if it has none): where pods on real
# nodes reach the apiserver and the kubelets listen.
host_ipv4() { ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1; }

# kubectl built at the pinned version (the one on PATH, if any, may be far older).
kubectl_bin() { echo "$K8S_BIN/kubectl"; }

# resolve_muster_bin: unless MUSTER_BIN or MUSTER_NODES_JSON is set, build the muster CLI
# once (cargo build -p muster) and export MUSTER_BIN, so that later node-list requests do
# not each go through `cargo run`.
resolve_muster_bin() {
  [[ -n ${MUSTER_BIN:-} || -n ${MUSTER_NODES_JSON:-} ]] && return 0
  command -v cargo >/dev/null || die "cargo not found: set MUSTER_BIN (a built muster) or MUSTER_NODES_JSON"
  log "building the muster CLI (for 'muster cluster nodes')"
  (cd "$repo_dir" && cargo build -q -p muster) || die "cargo build -p muster failed"
  local target
  target=$(cd "$repo_dir" && cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  [[ -x $target/debug/muster ]] || die "no muster binary at $target/debug/muster"
  export MUSTER_BIN=$target/debug/muster
}

# resolve_harness_bin [PROFILE]: unless MUSTER_HARNESS_BIN is set, build muster-harness
# (crates/muster-harness) and export MUSTER_HARNESS_BIN. PROFILE (default $MUSTER_HARNESS_PROFILE,
# else debug, which shares what `cargo test` built) is release for benchmarks: there it follows
# thousands of pods through watches on cores the control plane shares.
resolve_harness_bin() {
  [[ -n ${MUSTER_HARNESS_BIN:-} ]] && return 0
  local profile=${1:-${MUSTER_HARNESS_PROFILE:-debug}} flag="" dir=debug
  [[ $profile == release ]] && { flag=--release; dir=release; }
  command -v cargo >/dev/null || die "cargo not found: set MUSTER_HARNESS_BIN (a built muster-harness)"
  (cd "$repo_dir" && cargo build -q $flag -p muster-harness) || die "cargo build $flag -p muster-harness failed"
  local target
  target=$(cd "$repo_dir" && cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  [[ -x $target/$dir/muster-harness ]] || die "no muster-harness binary at $target/$dir/muster-harness"
  export MUSTER_HARNESS_BIN=$target/$dir/muster-harness
}

# restart_component NAME DOWN_SECONDS [ARGS...]: stop a control-plane process cluster-up.sh
# started (SIGTERM, by its recorded pid), leave it down DOWN_SECONDS, and start it again with the
# same command line (ARGS appended: the last flag wins), logging where it logged; the new pid is
# recorded for cluster-down.sh.
restart_component() {
  local name=$1 down=$2; shift 2
  local run=$MUSTER_CLUSTER_DIR/run pid
  read -r pid < "$run/$name.pid"
  kill -TERM "$pid" 2>/dev/null || true
  while [[ -d /proc/$pid ]]; do sleep 0.1; done
  sleep "$down"
  # shellcheck disable=SC2046 # the recorded command line is words without spaces
  setsid $(cat "$run/$name.cmd") "$@" >>"$MUSTER_CLUSTER_DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! > "$run/$name.pid"
}

# go_tool NAME PACKAGE VERSION DIR [LDFLAGS]: the binary NAME of Go package PACKAGE at vVERSION,
# built once (go install, static, trimmed) into DIR; prints its path. A failed build leaves
# nothing behind.
go_tool() {
  local name=$1 package=$2 version=$3 dir=$4 ldflags=${5:-"-s -w"}
  [[ -x $dir/$name ]] && { echo "$dir/$name"; return 0; }
  command -v go >/dev/null || die "go is not on PATH (needed once, to build $name v$version)"
  mkdir -p "$MUSTER_CACHE" "$(dirname "$dir")"
  local out t0
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX"); chmod 755 "$out"
  log "building $name v$version into $dir"
  t0=$(date +%s)
  if ! (cd "$out" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS='' GOBIN="$out" \
          go install -trimpath -ldflags "$ldflags" "$package@v$version"); then
    rm -rf "$out"; die "build of $name v$version failed"
  fi
  rm -rf "$dir"; mv "$out" "$dir" || { rm -rf "$out"; die "cannot move $name into $dir"; }
  log "$name built in $(( $(date +%s) - t0 ))s"
  echo "$dir/$name"
}
