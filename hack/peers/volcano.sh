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
# VOLCANO_SCHEDULER_CONF (a file) replaces the Helm chart's scheduler configuration.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0
VOLCANO_DIR=$MUSTER_CACHE/volcano-$VOLCANO_VERSION
state=$MUSTER_CLUSTER_DIR/volcano
logs=$MUSTER_CLUSTER_DIR/logs
KUBECTL=$K8S_BIN/kubectl
kc() { "$KUBECTL" --kubeconfig "$MUSTER_CLUSTER_DIR/kubeconfig" "$@"; }
COMPONENTS="controller-manager scheduler"

built() {
  [[ -x $VOLCANO_DIR/vc-scheduler && -x $VOLCANO_DIR/vc-controller-manager && -d $VOLCANO_DIR/crds &&
     -s $VOLCANO_DIR/volcano-scheduler.conf ]]
}

# apis_into DIR ORIGIN_HASH: put the volcano.sh/apis source of this version into DIR
apis_into() {
  local dest=$1 hash=$2 dir
  if dir=$(GOFLAGS="" go mod download -json "volcano.sh/apis@v$VOLCANO_VERSION" 2>/dev/null |
      python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(1))'); then
    log "volcano.sh/apis v$VOLCANO_VERSION from the Go module proxy"
    cp -r "$dir/." "$dest/"
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

build() {
  if built; then echo "$VOLCANO_DIR"; return; fi
  command -v go >/dev/null || die "go is not on PATH"
  local info dir hash out t0 c
  info=$(GOFLAGS="" go mod download -json "volcano.sh/volcano@v$VOLCANO_VERSION") ||
    die "cannot download volcano.sh/volcano v$VOLCANO_VERSION"
  dir=$(python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))' <<<"$info") ||
    die "cannot download volcano.sh/volcano v$VOLCANO_VERSION"
  hash=$(python3 -c 'import json, sys; print((json.load(sys.stdin).get("Origin") or {}).get("Hash", ""))' <<<"$info")
  mkdir -p "$MUSTER_CACHE"
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX")
  # The module cache is read-only and the replaced staging directory must sit inside the module:
  # build in a writable copy of it.
  mkdir -p "$out/src"
  cp -r "$dir/." "$out/src/"
  chmod -R u+w "$out/src"
  mkdir -p "$out/src/staging/src/volcano.sh/apis"
  if ! (apis_into "$out/src/staging/src/volcano.sh/apis" "$hash"); then rm -rf "$out"; exit 1; fi
  chmod -R u+w "$out/src/staging"
  log "building vc-scheduler and vc-controller-manager v$VOLCANO_VERSION into $VOLCANO_DIR (many minutes on 2 cores)"
  t0=$(date +%s)
  # Built inside the module copy with -mod=readonly, so its go.sum pins every dependency.
  for c in scheduler controller-manager; do
    if ! (cd "$out/src" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$out/vc-$c" "./cmd/$c"); then
      rm -rf "$out"; die "build of vc-$c failed"
    fi
  done
  mkdir "$out/crds"
  cp "$out/src"/config/crd/volcano/bases/*.yaml "$out/src"/config/crd/jobflow/bases/*.yaml "$out/crds/"
  cp "$out/src/installer/helm/chart/volcano/config/volcano-scheduler.conf" "$out/volcano-scheduler.conf"
  tar -C "$out/src/staging/src/volcano.sh" -czf "$out/apis-src.tar.gz" apis
  rm -rf "$out/src"
  chmod -R u+w,a+rX "$out"
  rm -rf "$VOLCANO_DIR"; mv "$out" "$VOLCANO_DIR"
  log "Volcano built in $(( $(date +%s) - t0 ))s"
  echo "$VOLCANO_DIR"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# cert NAME SUBJECT USAGE: an ECDSA key and a certificate signed by the harness CA
cert() {
  local name=$1 subj=$2 usage=$3 pki=$MUSTER_CLUSTER_DIR/pki
  openssl ecparam -name prime256v1 -genkey -noout -out "$state/$name.key" 2>/dev/null
  openssl req -new -key "$state/$name.key" -subj "$subj" -out "$state/$name.csr" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' \
    "$usage" > "$state/$name.ext"
  openssl x509 -req -in "$state/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$state/$name.ext" -out "$state/$name.crt" 2>/dev/null
  rm -f "$state/$name.csr" "$state/$name.ext"
  chmod 600 "$state/$name.key"
}

running() { # running COMPONENT: its recorded pid is alive and runs its binary
  local pid
  pid=$(cat "$state/$1.pid" 2>/dev/null) || return 1
  [[ -n $pid && -d /proc/$pid ]] && grep -qF "$VOLCANO_DIR/vc-$1" "/proc/$pid/cmdline" 2>/dev/null
}

# wait_healthy COMPONENT PORT: until /healthz answers (fails if the process exits)
wait_healthy() {
  local c=$1 port=$2 deadline=$(( $(date +%s) + 120 ))
  until curl -fsS --max-time 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$state/$c.pid")" 2>/dev/null; then
      tail -n 30 "$logs/volcano-$c.log" >&2; die "vc-$c exited during startup; log: $logs/volcano-$c.log"
    fi
    (( $(date +%s) < deadline )) || { tail -n 30 "$logs/volcano-$c.log" >&2; die "vc-$c not healthy after 120s"; }
    sleep 0.5
  done
}

up() {
  [[ -s $MUSTER_CLUSTER_DIR/kubeconfig ]] || die "no harness cluster at $MUSTER_CLUSTER_DIR (make cluster-up)"
  build >/dev/null
  if running scheduler && running controller-manager; then
    log "Volcano already running (pids $(cat "$state/scheduler.pid") $(cat "$state/controller-manager.pid"))"; return 0
  fi
  down >/dev/null 2>&1 || true
  rm -rf "$state"; mkdir -p "$state" "$logs"; chmod 700 "$state"
  local sched_health sched_metrics cm_health cm_metrics p used=" "
  for p in sched_health sched_metrics cm_health cm_metrics; do
    local port; port=$(free_port)
    while [[ $used == *" $port "* ]]; do port=$(free_port); done
    used+="$port "; printf -v "$p" '%s' "$port"
  done
  printf 'VOLCANO_SCHEDULER_HEALTHZ_PORT=%s\nVOLCANO_SCHEDULER_METRICS_PORT=%s\nVOLCANO_CONTROLLER_HEALTHZ_PORT=%s\nVOLCANO_CONTROLLER_METRICS_PORT=%s\n' \
    "$sched_health" "$sched_metrics" "$cm_health" "$cm_metrics" > "$state/ports.env"

  # Identity: a client cert in system:masters (like the harness's kwok; no RBAC objects).
  cert client "/O=system:masters/CN=volcano" clientAuth
  local server
  server=$(awk '/server:/ {print $2; exit}' "$MUSTER_CLUSTER_DIR/kubeconfig")
  cat > "$state/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster-local
  cluster: {server: $server, certificate-authority: $MUSTER_CLUSTER_DIR/pki/ca.crt}
users:
- name: volcano
  user: {client-certificate: $state/client.crt, client-key: $state/client.key}
contexts:
- name: muster-local
  context: {cluster: muster-local, user: volcano}
current-context: muster-local
EOF

  # The scheduler configuration: the Helm chart's default (installer/helm/chart/volcano/config/
  # volcano-scheduler.conf of the module), unless VOLCANO_SCHEDULER_CONF names another file.
  cp "${VOLCANO_SCHEDULER_CONF:-$VOLCANO_DIR/volcano-scheduler.conf}" "$state/scheduler.conf"

  # CRDs: everything the chart installs (config/crd/volcano/bases and config/crd/jobflow/bases);
  # the default controller set watches them all. Server-side: some exceed the annotation limit.
  kc apply --server-side --force-conflicts --field-manager=muster-peers -f "$VOLCANO_DIR/crds" >/dev/null ||
    die "applying Volcano's CRDs failed"
  kc wait --for condition=Established --timeout=60s -f "$VOLCANO_DIR/crds" >/dev/null || die "Volcano's CRDs not Established"
  kc create namespace volcano-system --dry-run=client -o yaml | kc apply -f - >/dev/null

  # Flags as the chart's Deployments pass them, except: kubeconfig instead of the in-cluster
  # service account, leader election off (one replica), health and metrics servers on loopback.
  log "starting vc-controller-manager v$VOLCANO_VERSION (healthz 127.0.0.1:$cm_health)"
  setsid "$VOLCANO_DIR/vc-controller-manager" --kubeconfig="$state/kubeconfig" --leader-elect=false \
    --enable-healthz=true --healthz-address="127.0.0.1:$cm_health" --listen-address="127.0.0.1:$cm_metrics" \
    --logtostderr -v=4 >>"$logs/volcano-controller-manager.log" 2>&1 < /dev/null &
  echo $! > "$state/controller-manager.pid"
  log "starting vc-scheduler v$VOLCANO_VERSION (healthz 127.0.0.1:$sched_health)"
  setsid "$VOLCANO_DIR/vc-scheduler" --kubeconfig="$state/kubeconfig" --leader-elect=false \
    --scheduler-conf="$state/scheduler.conf" --enable-healthz=true --healthz-address="127.0.0.1:$sched_health" \
    --listen-address="127.0.0.1:$sched_metrics" --cache-dump-dir="$state" \
    --logtostderr -v=3 >>"$logs/volcano-scheduler.log" 2>&1 < /dev/null &
  echo $! > "$state/scheduler.pid"
  wait_healthy controller-manager "$cm_health"
  wait_healthy scheduler "$sched_health"

  # The scheduler creates the queues `root` and `default` at startup; the queue controller opens them.
  local deadline=$(( $(date +%s) + 60 ))
  until [[ $(kc get queues.scheduling.volcano.sh default -o jsonpath='{.status.state}' 2>/dev/null) == Open ]]; do
    (( $(date +%s) < deadline )) || die "Volcano's queue 'default' not Open after 60s (logs in $logs)"
    for c in $COMPONENTS; do
      running "$c" || { tail -n 30 "$logs/volcano-$c.log" >&2; die "vc-$c exited; log: $logs/volcano-$c.log"; }
    done
    sleep 0.5
  done
  log "Volcano up (scheduler pid $(cat "$state/scheduler.pid"), controller-manager pid $(cat "$state/controller-manager.pid")); logs: $logs/volcano-*.log"
}

down() {
  local c pid _
  for c in scheduler controller-manager; do
    pid=$(cat "$state/$c.pid" 2>/dev/null) || pid=""
    if [[ -n $pid ]] && running "$c"; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
      log "vc-$c stopped (pid $pid)"
    fi
    rm -f "$state/$c.pid"
  done
}

case ${1:-} in
  build) build ;;
  up) up ;;
  down) down ;;
  *) die "usage: hack/peers/volcano.sh build|up|down" ;;
esac
