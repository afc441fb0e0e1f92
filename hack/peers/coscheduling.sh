#!/usr/bin/env bash
# The real scheduler-plugins coscheduling (SCHEDULER_PLUGINS_VERSION in hack/versions.env): its
# kube-scheduler, built from the Go module sigs.k8s.io/scheduler-plugins, run as a local process
# and as a second scheduler (schedulerName `coscheduling`) beside the harness's kube-scheduler,
# with the Coscheduling plugin enabled; and its controller, which keeps PodGroup status. See
# docs/peers.md.
#
#   hack/peers/coscheduling.sh build   build both binaries once and copy the PodGroup and
#                                      ElasticQuota CRDs into $MUSTER_CACHE/scheduler-plugins-<v>/
#                                      (prints that directory)
#   hack/peers/coscheduling.sh up      CRDs, then the controller and the scheduler
#   hack/peers/coscheduling.sh down    stop both (by recorded pid); the CRDs and PodGroups stay
#
# State in $MUSTER_CLUSTER_DIR/coscheduling/ (certs, kubeconfig, config.yaml, pids, ports); logs
# $MUSTER_CLUSTER_DIR/logs/coscheduling-scheduler.log and coscheduling-controller.log.
# COSCHEDULING_SCHEDULER_NAME (default coscheduling) is the profile's schedulerName, the one pods
# name in spec.schedulerName; COSCHEDULING_PERMIT_WAIT_SECONDS (default 10, the value of the
# plugin's sample configuration) is the Coscheduling argument permitWaitingTimeSeconds.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0
SP_DIR=$MUSTER_CACHE/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION
SCHEDULER_NAME=${COSCHEDULING_SCHEDULER_NAME:-coscheduling}
state=$MUSTER_CLUSTER_DIR/coscheduling
logs=$MUSTER_CLUSTER_DIR/logs
KUBECTL=$K8S_BIN/kubectl
kc() { "$KUBECTL" --kubeconfig "$MUSTER_CLUSTER_DIR/kubeconfig" "$@"; }

build() {
  if [[ -x $SP_DIR/kube-scheduler && -x $SP_DIR/controller && -s $SP_DIR/crds/podgroups.yaml ]]; then
    echo "$SP_DIR"; return
  fi
  command -v go >/dev/null || die "go is not on PATH"
  local dir out t0
  # Only the module itself: `go mod download` of all its dependencies fails on one the proxy
  # refuses, which neither binary needs; `go build` fetches just the packages it compiles.
  dir=$(GOFLAGS="" go mod download -json "sigs.k8s.io/scheduler-plugins@v$SCHEDULER_PLUGINS_VERSION" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))') ||
    die "cannot download sigs.k8s.io/scheduler-plugins v$SCHEDULER_PLUGINS_VERSION"
  mkdir -p "$MUSTER_CACHE"
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX")
  log "building scheduler-plugins v$SCHEDULER_PLUGINS_VERSION (kube-scheduler, controller) into $SP_DIR (minutes on 2 cores)"
  t0=$(date +%s)
  # Built inside the unpacked module, so its go.sum pins every dependency.
  if ! (cd "$dir" && GOFLAGS=-mod=readonly nice go build -trimpath -ldflags "-s -w" -o "$out/kube-scheduler" ./cmd/scheduler); then
    rm -rf "$out"; die "build of the scheduler-plugins kube-scheduler failed"
  fi
  log "kube-scheduler built in $(( $(date +%s) - t0 ))s"
  if ! (cd "$dir" && GOFLAGS=-mod=readonly nice go build -trimpath -ldflags "-s -w" -o "$out/controller" ./cmd/controller); then
    rm -rf "$out"; die "build of the scheduler-plugins controller failed"
  fi
  mkdir "$out/crds"
  cp "$dir/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" "$out/crds/podgroups.yaml"
  # The controller also reconciles ElasticQuotas and does not start without their CRD.
  cp "$dir/config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml" "$out/crds/elasticquotas.yaml"
  chmod -R u+w,a+rX "$out"
  rm -rf "$SP_DIR"; mv "$out" "$SP_DIR"
  log "scheduler-plugins built in $(( $(date +%s) - t0 ))s"
  echo "$SP_DIR"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# cert NAME SUBJECT USAGE [SAN]: an ECDSA key and a certificate signed by the harness CA
cert() {
  local name=$1 subj=$2 usage=$3 san=${4:-} pki=$MUSTER_CLUSTER_DIR/pki
  openssl ecparam -name prime256v1 -genkey -noout -out "$state/$name.key" 2>/dev/null
  openssl req -new -key "$state/$name.key" -subj "$subj" -out "$state/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } > "$state/$name.ext"
  openssl x509 -req -in "$state/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$state/$name.ext" -out "$state/$name.crt" 2>/dev/null
  rm -f "$state/$name.csr" "$state/$name.ext"
  chmod 600 "$state/$name.key"
}

running() { # running NAME BINARY: the pid recorded for NAME is alive and runs BINARY
  local pid
  pid=$(cat "$state/$1.pid" 2>/dev/null) || return 1
  [[ -n $pid && -d /proc/$pid ]] && grep -qF "$2" "/proc/$pid/cmdline" 2>/dev/null
}

# wait_ready NAME URL: poll URL until it answers, or die with the tail of NAME's log
wait_ready() {
  local name=$1 url=$2 deadline=$(( $(date +%s) + 120 ))
  until curl -fsSk --max-time 2 "$url" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$state/$name.pid")" 2>/dev/null; then
      tail -n 30 "$logs/coscheduling-$name.log" >&2; die "coscheduling $name exited during startup; log: $logs/coscheduling-$name.log"
    fi
    (( $(date +%s) < deadline )) || { tail -n 30 "$logs/coscheduling-$name.log" >&2; die "coscheduling $name not ready after 120s"; }
    sleep 0.5
  done
}

up() {
  [[ -s $MUSTER_CLUSTER_DIR/kubeconfig ]] || die "no harness cluster at $MUSTER_CLUSTER_DIR (make cluster-up)"
  build >/dev/null
  if running scheduler "$SP_DIR/kube-scheduler" && running controller "$SP_DIR/controller"; then
    log "coscheduling already running (scheduler pid $(cat "$state/scheduler.pid"), controller pid $(cat "$state/controller.pid"))"
    return 0
  fi
  down_quiet
  rm -rf "$state"; mkdir -p "$state" "$logs"
  chmod 700 "$state"
  local sched_port metrics_port probe_port
  sched_port=$(free_port); metrics_port=$(free_port); probe_port=$(free_port)
  while [[ $metrics_port == "$sched_port" ]]; do metrics_port=$(free_port); done
  while [[ $probe_port == "$sched_port" || $probe_port == "$metrics_port" ]]; do probe_port=$(free_port); done
  printf 'COSCHEDULING_SCHEDULER_PORT=%s\nCOSCHEDULING_CONTROLLER_METRICS_PORT=%s\nCOSCHEDULING_CONTROLLER_PROBE_PORT=%s\n' \
    "$sched_port" "$metrics_port" "$probe_port" > "$state/ports.env"

  # Identity: one client cert in system:masters (like the harness's kwok and hack/peers/kueue.sh)
  # for both processes, so none of the chart's RBAC is needed; serving: SAN 127.0.0.1.
  cert client "/O=system:masters/CN=scheduler-plugins" clientAuth
  cert serving "/CN=scheduler-plugins-scheduler" serverAuth "IP:127.0.0.1,DNS:localhost"
  local server
  server=$(awk '/server:/ {print $2; exit}' "$MUSTER_CLUSTER_DIR/kubeconfig")
  cat > "$state/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster-local
  cluster: {server: $server, certificate-authority: $MUSTER_CLUSTER_DIR/pki/ca.crt}
users:
- name: scheduler-plugins
  user: {client-certificate: $state/client.crt, client-key: $state/client.key}
contexts:
- name: muster-local
  context: {cluster: muster-local, user: scheduler-plugins}
current-context: muster-local
EOF

  # The configuration (docs/peers.md gives the scheduler-plugins document each setting follows):
  # the plugin's own sample (manifests/coscheduling/scheduler-config.yaml, repeated in
  # pkg/coscheduling/README.md): Coscheduling at every extension point it implements (multiPoint:
  # queueSort, preFilter, postFilter, permit, reserve), the only queueSort; the profile's name as
  # the Helm chart's second scheduler has one of its own; client limits as the harness's
  # kube-scheduler has them (hack/cluster-up.sh).
  cat > "$state/config.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: $state/kubeconfig
  qps: 500
  burst: 1000
profiles:
- schedulerName: $SCHEDULER_NAME
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: ${COSCHEDULING_PERMIT_WAIT_SECONDS:-10}
EOF

  kc apply --server-side --force-conflicts --field-manager=muster-peers -f "$SP_DIR/crds/" >/dev/null ||
    die "applying scheduler-plugins' CRDs failed"
  kc wait --for condition=Established --timeout=60s -f "$SP_DIR/crds/" >/dev/null || die "scheduler-plugins' CRDs not Established"

  log "starting the scheduler-plugins controller v$SCHEDULER_PLUGINS_VERSION: metrics :$metrics_port, probes :$probe_port"
  setsid "$SP_DIR/controller" --kubeconfig="$state/kubeconfig" \
    --metricsAddr="127.0.0.1:$metrics_port" --probeAddr="127.0.0.1:$probe_port" \
    --qps=100 --burst=200 --workers=4 \
    >>"$logs/coscheduling-controller.log" 2>&1 < /dev/null &
  echo $! > "$state/controller.pid"

  log "starting the scheduler-plugins kube-scheduler v$SCHEDULER_PLUGINS_VERSION (schedulerName $SCHEDULER_NAME): https://127.0.0.1:$sched_port"
  setsid "$SP_DIR/kube-scheduler" --config="$state/config.yaml" \
    --authentication-kubeconfig="$state/kubeconfig" --authorization-kubeconfig="$state/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" \
    --tls-cert-file="$state/serving.crt" --tls-private-key-file="$state/serving.key" \
    --client-ca-file="$MUSTER_CLUSTER_DIR/pki/ca.crt" \
    --profiling=false --v=2 \
    >>"$logs/coscheduling-scheduler.log" 2>&1 < /dev/null &
  echo $! > "$state/scheduler.pid"

  wait_ready controller "http://127.0.0.1:$probe_port/readyz"
  wait_ready scheduler "https://127.0.0.1:$sched_port/healthz"
  log "coscheduling up (scheduler pid $(cat "$state/scheduler.pid"), controller pid $(cat "$state/controller.pid")); logs: $logs/coscheduling-{scheduler,controller}.log"
}

stop() { # stop NAME BINARY: TERM the recorded pid (KILL after 10 s) if it still runs BINARY
  local pid
  pid=$(cat "$state/$1.pid" 2>/dev/null) || pid=""
  if [[ -n $pid ]] && running "$1" "$2"; then
    kill -TERM "$pid" 2>/dev/null || true
    local _
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    log "coscheduling $1 stopped (pid $pid)"
  fi
  rm -f "$state/$1.pid"
}
down_quiet() { stop scheduler "$SP_DIR/kube-scheduler" 2>/dev/null; stop controller "$SP_DIR/controller" 2>/dev/null; }
down() {
  stop scheduler "$SP_DIR/kube-scheduler"
  stop controller "$SP_DIR/controller"
}

case ${1:-} in
  build) build ;;
  up) up ;;
  down) down ;;
  *) die "usage: hack/peers/coscheduling.sh build|up|down" ;;
esac
