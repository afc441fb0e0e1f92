#!/usr/bin/env bash
# Fetch, once, the third-party pieces muster integrates with, from their Go modules (through
# the Go module proxy, like cluster-build.sh), into a cache outside the repo:
#   $MUSTER_CACHE/third-party/podgroups-<v>.yaml   scheduler-plugins' PodGroup CRD
#   $MUSTER_CACHE/jobset-<v>/jobset                the JobSet controller
#   $MUSTER_CACHE/jobset-<v>/jobsets.yaml          its CRD
#   $MUSTER_CACHE/mpi-operator-<v>/mpi-operator    Kubeflow's MPIJob operator
#   $MUSTER_CACHE/mpi-operator-<v>/mpijobs.yaml    its CRD
#   $MUSTER_CACHE/kuberay-<v>/ray-operator         KubeRay's operator
#   $MUSTER_CACHE/kuberay-<v>/ray{jobs,clusters,services}.yaml   its CRDs
#   $MUSTER_CACHE/lws-<v>/lws                      the LeaderWorkerSet controller
#   $MUSTER_CACHE/lws-<v>/leaderworkersets.yaml    its CRD
#   $MUSTER_CACHE/trainer-<v>/trainer-controller-manager   Kubeflow Trainer's controller
#   $MUSTER_CACHE/trainer-<v>/{trainjobs,trainingruntimes,clustertrainingruntimes}.yaml   its CRDs
#   hack/third-party.sh [podgroup|jobset|mpi-operator|kuberay|lws|trainer]...   (default: all)
# Prints the path of each (the CRD file; the controller's directory) on stdout, one a line.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$MUSTER_CACHE/third-party"
PODGROUP_CRD=$MUSTER_CACHE/third-party/podgroups-$SCHEDULER_PLUGINS_VERSION.yaml
JOBSET_BIN=$MUSTER_CACHE/jobset-$JOBSET_VERSION
MPI_OPERATOR_BIN=$MUSTER_CACHE/mpi-operator-$MPI_OPERATOR_VERSION
KUBERAY_BIN=$MUSTER_CACHE/kuberay-$KUBERAY_VERSION
LWS_BIN=$MUSTER_CACHE/lws-$LWS_VERSION
TRAINER_BIN=$MUSTER_CACHE/trainer-$TRAINER_VERSION

# module_dir MODULE VERSION: the unpacked module in the Go module cache (downloaded if missing)
module_dir() {
  GOFLAGS= go mod download -json "$1@v$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'
}

podgroup() {
  [[ -s $PODGROUP_CRD ]] && { echo "$PODGROUP_CRD"; return; }
  local dir
  dir=$(module_dir sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION") || die "cannot download scheduler-plugins"
  cp "$dir/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" "$PODGROUP_CRD.tmp"
  mv "$PODGROUP_CRD.tmp" "$PODGROUP_CRD"
  log "PodGroup CRD from scheduler-plugins v$SCHEDULER_PLUGINS_VERSION: $PODGROUP_CRD"
  echo "$PODGROUP_CRD"
}

# controller NAME MODULE VERSION PACKAGE DIR BINARY CRD...: builds a controller from its module
# once (inside the unpacked module, so its go.sum pins every dependency) into DIR/BINARY, with its
# CRDs beside it as DIR/<plural>.yaml
controller() {
  local name=$1 module=$2 version=$3 package=$4 dir=$5 binary=$6 src out t0 crd missing=""; shift 6
  for crd in "$@"; do [[ -s $dir/${crd##*_} ]] || missing=1; done
  if [[ -x $dir/$binary && -z $missing ]]; then
    echo "$dir"; return
  fi
  src=$(module_dir "$module" "$version") || die "cannot download $module"
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX")
  log "building the $name v$version into $dir"
  t0=$(date +%s)
  if ! (cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$out/$binary" "$package"); then
    rm -rf "$out"; die "build of the $name failed"
  fi
  for crd in "$@"; do cp "$src/$crd" "$out/${crd##*_}"; done
  chmod -R u+w,a+rX "$out"
  rm -rf "$dir"; mv "$out" "$dir"
  log "$name built in $(( $(date +%s) - t0 ))s"
  echo "$dir"
}

jobset() {
  controller "JobSet controller" sigs.k8s.io/jobset "$JOBSET_VERSION" . "$JOBSET_BIN" jobset \
    config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml
}

mpi_operator() {
  controller "MPIJob operator" github.com/kubeflow/mpi-operator "$MPI_OPERATOR_VERSION" ./cmd/mpi-operator \
    "$MPI_OPERATOR_BIN" mpi-operator manifests/base/kubeflow.org_mpijobs.yaml
}

kuberay() {
  controller "KubeRay operator" github.com/ray-project/kuberay/ray-operator "$KUBERAY_VERSION" . \
    "$KUBERAY_BIN" ray-operator config/crd/bases/ray.io_rayjobs.yaml config/crd/bases/ray.io_rayclusters.yaml \
    config/crd/bases/ray.io_rayservices.yaml
}

lws() {
  controller "LeaderWorkerSet controller" sigs.k8s.io/lws "$LWS_VERSION" ./cmd "$LWS_BIN" lws \
    config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml
}

trainer() {
  local crds=manifests/base/crds/trainer.kubeflow.org
  controller "Kubeflow Trainer controller" github.com/kubeflow/trainer/v2 "$TRAINER_VERSION" \
    ./cmd/trainer-controller-manager "$TRAINER_BIN" trainer-controller-manager \
    "${crds}_trainjobs.yaml" "${crds}_trainingruntimes.yaml" "${crds}_clustertrainingruntimes.yaml"
}

what=("$@"); (( ${#what[@]} )) || what=(podgroup jobset mpi-operator kuberay lws trainer)
for w in "${what[@]}"; do
  case $w in
    podgroup) podgroup ;;
    jobset) jobset ;;
    mpi-operator) mpi_operator ;;
    kuberay) kuberay ;;
    lws) lws ;;
    trainer) trainer ;;
    *) die "unknown: $w (podgroup, jobset, mpi-operator, kuberay, lws or trainer)" ;;
  esac
done
