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
MUSTER_CLUSTER_DIR=${MUSTER_CLUSTER_DIR:-$MUSTER_CACHE/cluster}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# kubectl built at the pinned version (the one on PATH, if any, may be far older).
kubectl_bin() { echo "$K8S_BIN/kubectl"; }
