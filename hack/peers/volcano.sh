#!/usr/bin/env bash
# The real Volcano (VOLCANO_VERSION in hack/versions.env): vc-scheduler and vc-controller-manager
# built from the Go module volcano.sh/volcano, run as local processes against the harness cluster
# ($MUSTER_CLUSTER_DIR/kubeconfig). See docs/peers.md.
#
#   hack/peers/volcano.sh build   build both binaries once and copy the module's CRDs and the Helm
#                                 chart's scheduler configuration into $MUSTER_CACHE/volcano-<v>/
#                                 (prints that directory)
#   hack/peers/volcano.sh up      CRDs (server-side), vc-controller-manager, vc-scheduler; waits
#                                 until both answer /healthz and the queue `default` is open
#   hack/peers/volcano.sh down    stop both (by recorded pid); the CRDs, queues and PodGroups stay
#
# No webhook-manager: plain pods with schedulerName volcano (batch/v1 Jobs) need none; its webhooks
# only validate and default Volcano's own objects (see docs/peers.md).
#
# The module's go.mod replaces volcano.sh/apis with ./staging/src/volcano.sh/apis, a nested
# module the module zip leaves out. `build` fills that directory from, in order:
#   1. the Go module proxy, volcano.sh/apis@v<VOLCANO_VERSION> (published from github.com/volcano-sh/apis);
#   2. the copy an earlier build kept, $MUSTER_CACHE/volcano-<v>/apis-src.tar.gz;
#   3. VOLCANO_APIS_DIR, a directory holding the volcano.sh/apis source of that version;
#   4. VOLCANO_GIT_DIR, a git clone of github.com/volcano-sh/volcano whose tag v<VOLCANO_VERSION>
#      is the very commit the proxy's module names (checked), via `git archive`.
# The copy used is kept in $MUSTER_CACHE/volcano-<v>/apis-src.tar.gz.
#
# State in $MUSTER_CLUSTER_DIR/volcano/ (certs, kubeconfig, scheduler.conf, pids, ports); logs in
# $MUSTER_CLUSTER_DIR/logs/volcano-{scheduler,controller-manager}.log.
# VOLCANO_SCHEDULER_CONF (a file) replaces the Helm chart's scheduler configuration;
# VOLCANO_NETWORK_TOPOLOGY=1 adds the network-topology-aware plugin to it.
set -euo pipefail
peer=volcano
. "$(dirname "$0")/lib.sh"
VOLCANO_DIR=$MUSTER_CACHE/volcano-$VOLCANO_VERSION
procs=(volcano-controller-manager volcano-scheduler)

built() {
  [[ -x $VOLCANO_DIR/vc-scheduler && -x $VOLCANO_DIR/vc-controller-manager && -d $VOLCANO_DIR/crds &&
     -s $VOLCANO_DIR/volcano-scheduler.conf ]]
}

# apis_into DIR ORIGIN_HASH: put the volcano.sh/apis source of this version into DIR
apis_into() {
  local dest=$1 hash=$2
  if go_module volcano.sh/apis "$VOLCANO_VERSION" 2>/dev/null; then
    log "volcano.sh/apis v$VOLCANO_VERSION from the Go module proxy"
    cp -r "$module_dir/." "$dest/"
  elif [[ -s $VOLCANO_DIR/apis-src.tar.gz ]]; then
    log "volcano.sh/apis from an earlier build's copy, $VOLCANO_DIR/apis-src.tar.gz"
    tar -xzf "$VOLCANO_DIR/apis-src.tar.gz" -C "$dest" --strip-components=1
  elif [[ -n ${VOLCANO_APIS_DIR:-} ]]; then
    [[ $(awk '/^module / {print $2; exit}' "$VOLCANO_APIS_DIR/go.mod" 2>/dev/null) == volcano.sh/apis ]] ||
      die "VOLCANO_APIS_DIR=$VOLCANO_APIS_DIR holds no volcano.sh/apis module (go.mod)"
    log "volcano.sh/apis from VOLCANO_APIS_DIR=$VOLCANO_APIS_DIR"
    cp -r "$VOLCANO_APIS_DIR/." "$dest/"
  elif [[ -n ${VOLCANO_GIT_DIR:-} ]]; then
    local tagged
    tagged=$(git --git-dir="$VOLCANO_GIT_DIR" rev-parse --verify -q "v$VOLCANO_VERSION^{commit}") ||
      die "VOLCANO_GIT_DIR=$VOLCANO_GIT_DIR has no tag v$VOLCANO_VERSION"
    [[ -z $hash || $tagged == "$hash" ]] ||
      die "tag v$VOLCANO_VERSION in $VOLCANO_GIT_DIR is $tagged, but the proxy's module was made from $hash"
    log "volcano.sh/apis from staging/src/volcano.sh/apis of $VOLCANO_GIT_DIR at v$VOLCANO_VERSION ($tagged)"
    git --git-dir="$VOLCANO_GIT_DIR" archive "$tagged" staging/src/volcano.sh/apis |
      tar -x -C "$dest" --strip-components=4
  else
    die "volcano.sh/volcano v$VOLCANO_VERSION replaces volcano.sh/apis with ./staging/src/volcano.sh/apis,
which its module zip does not contain, and the Go module proxy does not serve volcano.sh/apis
v$VOLCANO_VERSION here. Set VOLCANO_APIS_DIR to that module's source, or VOLCANO_GIT_DIR to a git
clone of github.com/volcano-sh/volcano (tag v$VOLCANO_VERSION), and run again."
  fi
  [[ -s $dest/go.mod ]] || die "no volcano.sh/apis source in $dest"
}

peer_source() { # MODULE_DIR SRC: the module with its replaced staging directory filled in
  mkdir -p "$2" && cp -r "$1/." "$2/" && chmod -R u+w "$2" || return 1
  mkdir -p "$2/staging/src/volcano.sh/apis" || return 1
  apis_into "$2/staging/src/volcano.sh/apis" "$module_hash"
  chmod -R u+w "$2/staging"
}

peer_files() { # SRC OUT: the CRDs, the chart's scheduler configuration, the volcano.sh/apis source used
  mkdir "$2/crds"
  cp "$1"/config/crd/volcano/bases/*.yaml "$1"/config/crd/jobflow/bases/*.yaml "$2/crds/"
  cp "$1/installer/helm/chart/volcano/config/volcano-scheduler.conf" "$2/volcano-scheduler.conf"
  tar -C "$1/staging/src/volcano.sh" -czf "$2/apis-src.tar.gz" apis
}

build() {
  if built; then echo "$VOLCANO_DIR"; return; fi
  go_module_build "$VOLCANO_DIR" volcano.sh/volcano "$VOLCANO_VERSION" \
    vc-scheduler=./cmd/scheduler vc-controller-manager=./cmd/controller-manager
}

up() {
  peer_need_cluster
  build >/dev/null
  if peer_all_running "${procs[@]}"; then return 0; fi
  peer_fresh_state "${procs[@]}"
  peer_ports VOLCANO_SCHEDULER_HEALTHZ_PORT VOLCANO_SCHEDULER_METRICS_PORT VOLCANO_CONTROLLER_HEALTHZ_PORT VOLCANO_CONTROLLER_METRICS_PORT
  peer_identity volcano

  # The scheduler configuration: the Helm chart's default (installer/helm/chart/volcano/config/
  # volcano-scheduler.conf of the module), unless VOLCANO_SCHEDULER_CONF names another file.
  cp "${VOLCANO_SCHEDULER_CONF:-$VOLCANO_DIR/volcano-scheduler.conf}" "$state/scheduler.conf"
  # VOLCANO_NETWORK_TOPOLOGY=1 adds the network-topology-aware plugin to the last tier, as Volcano's
  # guide "How to use network topology aware scheduling" does (the HyperNodes come from
  # `muster-harness objects --peer volcano --setup`).
  if [[ ${VOLCANO_NETWORK_TOPOLOGY:-} == 1 ]]; then
    grep -q 'name: network-topology-aware' "$state/scheduler.conf" ||
      printf '  - name: network-topology-aware\n' >> "$state/scheduler.conf"
  fi

  # CRDs: everything the chart installs (config/crd/volcano/bases and config/crd/jobflow/bases);
  # the default controller set watches them all.
  peer_apply_crds "$VOLCANO_DIR/crds"
  kc create namespace volcano-system --dry-run=client -o yaml | kc apply -f - >/dev/null

  # Flags as the chart's Deployments pass them, except: kubeconfig instead of the in-cluster
  # service account, leader election off (one replica), health and metrics servers on loopback.
  log "starting vc-controller-manager v$VOLCANO_VERSION (healthz 127.0.0.1:$VOLCANO_CONTROLLER_HEALTHZ_PORT)"
  peer_start volcano-controller-manager "$VOLCANO_DIR/vc-controller-manager" --kubeconfig="$state/kubeconfig" --leader-elect=false \
    --enable-healthz=true --healthz-address="127.0.0.1:$VOLCANO_CONTROLLER_HEALTHZ_PORT" \
    --listen-address="127.0.0.1:$VOLCANO_CONTROLLER_METRICS_PORT" --logtostderr -v=4
  log "starting vc-scheduler v$VOLCANO_VERSION (healthz 127.0.0.1:$VOLCANO_SCHEDULER_HEALTHZ_PORT)"
  peer_start volcano-scheduler "$VOLCANO_DIR/vc-scheduler" --kubeconfig="$state/kubeconfig" --leader-elect=false \
    --scheduler-conf="$state/scheduler.conf" --enable-healthz=true --healthz-address="127.0.0.1:$VOLCANO_SCHEDULER_HEALTHZ_PORT" \
    --listen-address="127.0.0.1:$VOLCANO_SCHEDULER_METRICS_PORT" --cache-dump-dir="$state" --logtostderr -v=3
  peer_wait_ready volcano-controller-manager "http://127.0.0.1:$VOLCANO_CONTROLLER_HEALTHZ_PORT/healthz"
  peer_wait_ready volcano-scheduler "http://127.0.0.1:$VOLCANO_SCHEDULER_HEALTHZ_PORT/healthz"

  # The scheduler creates the queues `root` and `default` at startup; the queue controller opens them.
  local deadline=$(( $(date +%s) + 60 )) c
  until [[ $(kc get queues.scheduling.volcano.sh default -o jsonpath='{.status.state}' 2>/dev/null) == Open ]]; do
    (( $(date +%s) < deadline )) || die "Volcano's queue 'default' not Open after 60s (logs in $logs)"
    for c in "${procs[@]}"; do peer_running "$c" || peer_died "$c" exited; done
    sleep 0.5
  done
  log "Volcano up (scheduler pid $(cat "$state/volcano-scheduler.pid"), controller-manager pid $(cat "$state/volcano-controller-manager.pid")); logs: $logs/volcano-*.log"
}

down() {
  peer_stop volcano-scheduler
  peer_stop volcano-controller-manager
}

peer_main "$@"
