#!/usr/bin/env bash
# Build, once, the pinned control-plane binaries into a cache outside the repo:
#   $MUSTER_CACHE/k8s-<v>/   kube-apiserver kube-controller-manager kube-scheduler kubectl
#   $MUSTER_CACHE/etcd-<v>/  etcd
#   $MUSTER_CACHE/kwok-<v>/  kwok
#   $MUSTER_CACHE/k8s-node-<v>/  kubelet kube-proxy               (real nodes, hack/real-nodes.sh)
#   $MUSTER_CACHE/containerd-<v>/  containerd containerd-shim-runc-v2 ctr
#   $MUSTER_CACHE/harness-tools/  the harness's own helpers (rebuilt when their sources change)
# A version bump in hack/versions.env changes the directory, so the next run rebuilds.
# Needs only Go and the Go module proxy.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

export GOTOOLCHAIN=local CGO_ENABLED=0
ldflags_common="-s -w"
build_start=$(date +%s)

command -v go >/dev/null || die "go is not on PATH"

# The wrapper modules must match versions.env (regen.sh writes them).
grep -q "k8s.io/kubernetes v$K8S_VERSION\b" "$hack_dir/k8s-build/go.mod" ||
  die "hack/k8s-build/go.mod does not pin k8s.io/kubernetes v$K8S_VERSION; run hack/k8s-build/regen.sh"
grep -q "go.etcd.io/etcd/server/v3 v$ETCD_VERSION\b" "$hack_dir/etcd-build/go.mod" ||
  die "hack/etcd-build/go.mod does not pin etcd v$ETCD_VERSION; run hack/k8s-build/regen.sh"
grep -q "github.com/containerd/containerd/v2 v$CONTAINERD_VERSION\b" "$hack_dir/containerd-build/go.mod" ||
  die "hack/containerd-build/go.mod does not pin containerd v$CONTAINERD_VERSION; run hack/k8s-build/regen.sh"

# build_into DIR CMD...: run CMD with $out set to a fresh temp dir, then move it to DIR.
build_into() {
  local dir=$1; shift
  local out
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX"); chmod 755 "$out"
  if ! out=$out "$@"; then rm -rf "$out"; die "build of $dir failed"; fi
  rm -rf "$dir"; mv "$out" "$dir"
}
mkdir -p "$MUSTER_CACHE"

k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
have_all() { local d=$1; shift; for b in "$@"; do [[ -x $d/$b ]] || return 1; done; }

minor=${K8S_VERSION#*.}; minor=${minor%%.*}
vx="-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
vx="$vx -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
# k8s_build CMD...: k8s.io/kubernetes/cmd/CMD of the wrapper module, into $out, in one go build so
# the commands share one compilation of their common packages.
k8s_build() {
  cd "$hack_dir/k8s-build" &&
    GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags_common $vx" -o "$out/" \
      $(printf 'k8s.io/kubernetes/cmd/%s ' "$@")
}
if have_all "$K8S_BIN" "${k8s_cmds[@]}"; then
  log "kubernetes v$K8S_VERSION: cached in $K8S_BIN"
else
  log "building kubernetes v$K8S_VERSION (${k8s_cmds[*]}) into $K8S_BIN; this takes a while on a cold cache"
  t0=$(date +%s); build_into "$K8S_BIN" k8s_build "${k8s_cmds[@]}"
  log "kubernetes built in $(( $(date +%s) - t0 ))s"
fi

if have_all "$ETCD_BIN" etcd; then
  log "etcd v$ETCD_VERSION: cached in $ETCD_BIN"
else
  log "building etcd v$ETCD_VERSION into $ETCD_BIN"
  etcd_build() {
    cd "$hack_dir/etcd-build" &&
      GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags_common" -o "$out/etcd" .
  }
  t0=$(date +%s); build_into "$ETCD_BIN" etcd_build
  log "etcd built in $(( $(date +%s) - t0 ))s"
fi

if have_all "$KWOK_BIN" kwok; then
  log "kwok v$KWOK_VERSION: cached in $KWOK_BIN"
else
  log "building kwok v$KWOK_VERSION into $KWOK_BIN"
  kwok_build() {
    cd "$out" && GOFLAGS= GOBIN="$out" go install -trimpath -ldflags "$ldflags_common" \
      "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  }
  t0=$(date +%s); build_into "$KWOK_BIN" kwok_build
  log "kwok built in $(( $(date +%s) - t0 ))s"
fi

node_cmds=(kubelet kube-proxy)
if have_all "$NODE_BIN" "${node_cmds[@]}"; then
  log "kubelet and kube-proxy v$K8S_VERSION: cached in $NODE_BIN"
else
  log "building kubernetes v$K8S_VERSION (${node_cmds[*]}) into $NODE_BIN"
  t0=$(date +%s); build_into "$NODE_BIN" k8s_build "${node_cmds[@]}"
  log "kubelet and kube-proxy built in $(( $(date +%s) - t0 ))s"
fi

containerd_cmds=(containerd containerd-shim-runc-v2 ctr)
if have_all "$CONTAINERD_BIN" "${containerd_cmds[@]}"; then
  log "containerd v$CONTAINERD_VERSION: cached in $CONTAINERD_BIN"
else
  log "building containerd v$CONTAINERD_VERSION (${containerd_cmds[*]}) into $CONTAINERD_BIN"
  # The btrfs, devmapper and zfs snapshotters need C libraries; real nodes use overlayfs.
  containerd_build() {
    cd "$hack_dir/containerd-build" &&
      GOFLAGS=-mod=readonly go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
        -ldflags "$ldflags_common -X github.com/containerd/containerd/v2/version.Version=v$CONTAINERD_VERSION" -o "$out/" \
        $(printf 'github.com/containerd/containerd/v2/cmd/%s ' "${containerd_cmds[@]}")
  }
  t0=$(date +%s); build_into "$CONTAINERD_BIN" containerd_build
  log "containerd built in $(( $(date +%s) - t0 ))s"
fi

# The harness's own helpers live in the k8s wrapper module; rebuild when their sources,
# go.mod or go.sum change (the stamp is a hash of them).
tools_stamp=$(cd "$hack_dir/k8s-build" && cat go.mod go.sum $(find cmd -name '*.go' 2>/dev/null | sort) | sha256sum | cut -c1-16)
if [[ -f $TOOLS_BIN/.stamp && $(cat "$TOOLS_BIN/.stamp") == "$tools_stamp" ]]; then
  log "harness tools: cached in $TOOLS_BIN"
elif [[ -d $hack_dir/k8s-build/cmd ]]; then
  log "building harness tools into $TOOLS_BIN"
  tools_build() {
    cd "$hack_dir/k8s-build" &&
      GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags_common" -o "$out/" ./cmd/... &&
      echo "$tools_stamp" > "$out/.stamp"
  }
  build_into "$TOOLS_BIN" tools_build
fi

log "binaries ready ($(( $(date +%s) - build_start ))s): $K8S_BIN $NODE_BIN $CONTAINERD_BIN $ETCD_BIN $KWOK_BIN $TOOLS_BIN"
