#!/usr/bin/env bash
# Fetch, once, the third-party pieces muster integrates with, from their Go modules (through
# the Go module proxy, like cluster-build.sh), into a cache outside the repo:
#   $MUSTER_CACHE/third-party/podgroups-<v>.yaml   scheduler-plugins' PodGroup CRD
#   $MUSTER_CACHE/jobset-<v>/jobset                the JobSet controller
#   $MUSTER_CACHE/jobset-<v>/jobsets.yaml          its CRD
#   hack/third-party.sh [podgroup|jobset]...   (default: both)
# Prints the path of each (the CRD file; the jobset directory) on stdout, one a line.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$MUSTER_CACHE/third-party"
PODGROUP_CRD=$MUSTER_CACHE/third-party/podgroups-$SCHEDULER_PLUGINS_VERSION.yaml
JOBSET_BIN=$MUSTER_CACHE/jobset-$JOBSET_VERSION

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

jobset() {
  if [[ -x $JOBSET_BIN/jobset && -s $JOBSET_BIN/jobsets.yaml ]]; then
    echo "$JOBSET_BIN"; return
  fi
  local dir out t0
  dir=$(module_dir sigs.k8s.io/jobset "$JOBSET_VERSION") || die "cannot download jobset"
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX")
  log "building the JobSet controller v$JOBSET_VERSION into $JOBSET_BIN"
  t0=$(date +%s)
  # Built inside the unpacked module, so its go.sum pins every dependency.
  if ! (cd "$dir" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$out/jobset" .); then
    rm -rf "$out"; die "build of the JobSet controller failed"
  fi
  cp "$dir/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" "$out/jobsets.yaml"
  chmod -R u+w,a+rX "$out"
  rm -rf "$JOBSET_BIN"; mv "$out" "$JOBSET_BIN"
  log "JobSet controller built in $(( $(date +%s) - t0 ))s"
  echo "$JOBSET_BIN"
}

what=("$@"); (( ${#what[@]} )) || what=(podgroup jobset)
for w in "${what[@]}"; do
  case $w in
    podgroup) podgroup ;;
    jobset) jobset ;;
    *) die "unknown: $w (podgroup or jobset)" ;;
  esac
done
