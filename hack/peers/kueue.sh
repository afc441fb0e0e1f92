#!/usr/bin/env bash
# The real Kueue (KUEUE_VERSION in hack/versions.env), built from its Go module, run as a local
# process against the harness cluster ($MUSTER_CLUSTER_DIR/kubeconfig). See docs/peers.md.
#
#   hack/peers/kueue.sh build   build the manager once and copy its CRDs and webhook manifests
#                               into $MUSTER_CACHE/kueue-<v>/ (prints that directory)
#   hack/peers/kueue.sh up      CRDs (conversion webhook on loopback), the manager with its
#                               webhook server on 127.0.0.1, then its webhook configurations
#   hack/peers/kueue.sh down    stop the manager (by pid) and remove its webhook configurations
#                               (they fail closed); the CRDs and Kueue's objects stay
#
# State in $MUSTER_CLUSTER_DIR/kueue/ (certs, kubeconfig, config.yaml, pid, ports);
# the manager's log is $MUSTER_CLUSTER_DIR/logs/kueue.log.
# KUEUE_PODS_READY_TIMEOUT (default 10m, the value of Kueue's waitForPodsReady page) overrides
# waitForPodsReady.timeout.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0
KUEUE_DIR=$MUSTER_CACHE/kueue-$KUEUE_VERSION
state=$MUSTER_CLUSTER_DIR/kueue
kueue_log=$MUSTER_CLUSTER_DIR/logs/kueue.log
KUBECTL=$K8S_BIN/kubectl
kc() { "$KUBECTL" --kubeconfig "$MUSTER_CLUSTER_DIR/kubeconfig" "$@"; }
# The CRDs Kueue's own kustomization (config/components/crd) serves through the conversion webhook.
CONVERTED="localqueues clusterqueues cohorts workloads multikueueclusters"
WEBHOOK_NAMES="kueue-mutating-webhook-configuration kueue-validating-webhook-configuration"

build() {
  if [[ -x $KUEUE_DIR/kueue && -s $KUEUE_DIR/webhooks.yaml && -d $KUEUE_DIR/crds ]]; then
    echo "$KUEUE_DIR"; return
  fi
  command -v go >/dev/null || die "go is not on PATH"
  local dir out t0
  dir=$(GOFLAGS="" go mod download -json "sigs.k8s.io/kueue@v$KUEUE_VERSION" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))') ||
    die "cannot download sigs.k8s.io/kueue v$KUEUE_VERSION"
  mkdir -p "$MUSTER_CACHE"
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX")
  log "building the Kueue manager v$KUEUE_VERSION into $KUEUE_DIR (a few minutes on 2 cores)"
  t0=$(date +%s)
  # Built inside the unpacked module, so its go.sum pins every dependency.
  if ! (cd "$dir" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$out/kueue" ./cmd/kueue); then
    rm -rf "$out"; die "build of the Kueue manager failed"
  fi
  mkdir "$out/crds"
  cp "$dir"/config/components/crd/bases/*.yaml "$out/crds/"
  cp "$dir/config/components/webhook/manifests.yaml" "$out/webhooks.yaml"
  chmod -R u+w,a+rX "$out"
  rm -rf "$KUEUE_DIR"; mv "$out" "$KUEUE_DIR"
  log "Kueue manager built in $(( $(date +%s) - t0 ))s"
  echo "$KUEUE_DIR"
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

running() { # the recorded pid is alive and runs the Kueue binary
  local pid
  pid=$(cat "$state/pid" 2>/dev/null) || return 1
  [[ -n $pid && -d /proc/$pid ]] && grep -qF "$KUEUE_DIR/kueue" "/proc/$pid/cmdline" 2>/dev/null
}

up() {
  [[ -s $MUSTER_CLUSTER_DIR/kubeconfig ]] || die "no harness cluster at $MUSTER_CLUSTER_DIR (make cluster-up)"
  build >/dev/null
  if running; then log "Kueue already running (pid $(cat "$state/pid"))"; return 0; fi
  rm -rf "$state"; mkdir -p "$state/webhook-certs" "$state/metrics-certs" "$(dirname "$kueue_log")"
  chmod 700 "$state"
  local webhook_port metrics_port health_port ca_bundle
  webhook_port=$(free_port); metrics_port=$(free_port); health_port=$(free_port)
  while [[ $metrics_port == "$webhook_port" ]]; do metrics_port=$(free_port); done
  while [[ $health_port == "$webhook_port" || $health_port == "$metrics_port" ]]; do health_port=$(free_port); done
  printf 'KUEUE_WEBHOOK_PORT=%s\nKUEUE_METRICS_PORT=%s\nKUEUE_HEALTH_PORT=%s\n' \
    "$webhook_port" "$metrics_port" "$health_port" > "$state/ports.env"

  # Identity: a client cert in system:masters (like the harness's kwok); serving: SAN 127.0.0.1.
  cert client "/O=system:masters/CN=kueue-controller-manager" clientAuth
  cert serving "/CN=kueue-webhook" serverAuth "IP:127.0.0.1,DNS:localhost"
  cp "$state/serving.crt" "$state/webhook-certs/tls.crt"; cp "$state/serving.key" "$state/webhook-certs/tls.key"
  cp "$state/serving.crt" "$state/metrics-certs/tls.crt"; cp "$state/serving.key" "$state/metrics-certs/tls.key"
  ca_bundle=$(base64 -w0 < "$MUSTER_CLUSTER_DIR/pki/ca.crt")
  local server
  server=$(awk '/server:/ {print $2; exit}' "$MUSTER_CLUSTER_DIR/kubeconfig")
  cat > "$state/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster-local
  cluster: {server: $server, certificate-authority: $MUSTER_CLUSTER_DIR/pki/ca.crt}
users:
- name: kueue
  user: {client-certificate: $state/client.crt, client-key: $state/client.key}
contexts:
- name: muster-local
  context: {cluster: muster-local, user: kueue}
current-context: muster-local
EOF

  # The configuration (docs/peers.md gives the Kueue page each setting follows).
  cat > "$state/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$health_port
metrics:
  bindAddress: 127.0.0.1:$metrics_port
webhook:
  host: 127.0.0.1
  port: $webhook_port
  certDir: $state/webhook-certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
waitForPodsReady:
  timeout: ${KUEUE_PODS_READY_TIMEOUT:-10m}
  blockAdmission: true
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 5
    backoffBaseSeconds: 60
    backoffMaxSeconds: 3600
integrations:
  frameworks:
  - batch/job
featureGates:
  VisibilityOnDemand: false
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
EOF

  # CRDs: the conversion webhook of the converted ones on the loopback URL, with the harness CA.
  # Server-side apply: the Workload CRD is larger than client-side apply's annotation limit.
  python3 - "$KUEUE_DIR/crds" "https://127.0.0.1:$webhook_port/convert" "$ca_bundle" "$CONVERTED" \
      > "$state/crds.yaml" <<'PY'
import glob, sys, yaml
crd_dir, url, ca, converted = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
docs = []
for f in sorted(glob.glob(crd_dir + "/*.yaml")):
    for d in yaml.safe_load_all(open(f)):
        if not d:
            continue
        if d["spec"]["names"]["plural"] in converted:
            d["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": url, "caBundle": ca}, "conversionReviewVersions": ["v1"]}}
        docs.append(d)
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
PY
  kc apply --server-side --force-conflicts --field-manager=muster-peers -f "$state/crds.yaml" >/dev/null ||
    die "applying Kueue's CRDs failed"
  kc wait --for condition=Established --timeout=60s -f "$state/crds.yaml" >/dev/null || die "Kueue's CRDs not Established"
  kc create namespace kueue-system --dry-run=client -o yaml | kc apply -f - >/dev/null

  # The manager reads its metrics certificate from the fixed path /etc/kueue/metrics/certs when
  # internal cert management is off. It gets that path in a mount namespace of its own: /etc as
  # an overlay whose upper layer is a tmpfs, the harness's cert bound there. Nothing on the host changes.
  log "starting Kueue v$KUEUE_VERSION: webhook https://127.0.0.1:$webhook_port, metrics :$metrics_port, health :$health_port"
  mkdir -p "$state/ns"
  echo "$KUEUE_DIR/kueue --config=$state/config.yaml --kubeconfig=$state/kubeconfig" > "$state/cmd"
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid unshare --mount --propagation private bash -c '
    set -e; s=$1; shift
    mount -t tmpfs tmpfs "$s/ns"
    mkdir -p "$s/ns/upper" "$s/ns/work"
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$s/ns/upper,workdir=$s/ns/work" /etc
    mkdir -p /etc/kueue/metrics/certs
    mount --bind "$s/metrics-certs" /etc/kueue/metrics/certs
    exec "$@"' kueue-ns "$state" \
    "$KUEUE_DIR/kueue" --config="$state/config.yaml" --kubeconfig="$state/kubeconfig" --zap-log-level=info \
    >>"$kueue_log" 2>&1 < /dev/null &
  echo $! > "$state/pid"
  local deadline=$(( $(date +%s) + 120 ))
  until curl -fsS --max-time 2 "http://127.0.0.1:$health_port/readyz" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      tail -n 30 "$kueue_log" >&2; die "Kueue exited during startup; log: $kueue_log"
    fi
    (( $(date +%s) < deadline )) || { tail -n 30 "$kueue_log" >&2; die "Kueue not ready after 120s; log: $kueue_log"; }
    sleep 0.5
  done

  # Webhook configurations: Kueue's own manifests (names as its kustomize prefix makes them), each
  # service clientConfig turned into the loopback URL; only the webhooks of Kueue's APIs and of
  # the one enabled integration (batch/job), with Kueue's namespaceSelector (not kube-system,
  # not kueue-system).
  python3 - "$KUEUE_DIR/webhooks.yaml" "https://127.0.0.1:$webhook_port" "$ca_bundle" \
      > "$state/webhooks.yaml" <<'PY'
import sys, yaml
src, base, ca = sys.argv[1:4]
keep = {"kueue.x-k8s.io", "batch"}
out = []
for d in yaml.safe_load_all(open(src)):
    if not d:
        continue
    d["metadata"]["name"] = "kueue-" + d["metadata"]["name"]
    hooks = []
    for w in d.get("webhooks", []):
        groups = {g for r in w.get("rules", []) for g in r.get("apiGroups", [])}
        if not groups & keep:
            continue
        path = w["clientConfig"]["service"]["path"]
        w["clientConfig"] = {"url": base + path, "caBundle": ca}
        if "batch" in groups:
            w["namespaceSelector"] = {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]}
        hooks.append(w)
    d["webhooks"] = hooks
    out.append(d)
yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
PY
  kc apply -f "$state/webhooks.yaml" >/dev/null || die "applying Kueue's webhook configurations failed"
  log "Kueue up (pid $(cat "$state/pid")); log: $kueue_log"
}

down() {
  local pid
  pid=$(cat "$state/pid" 2>/dev/null) || pid=""
  # Webhooks first: they fail closed once the manager is gone.
  for w in $WEBHOOK_NAMES; do
    kc delete mutatingwebhookconfiguration "$w" --ignore-not-found >/dev/null 2>&1 || true
    kc delete validatingwebhookconfiguration "$w" --ignore-not-found >/dev/null 2>&1 || true
  done
  if [[ -n $pid ]] && running; then
    kill -TERM "$pid" 2>/dev/null || true
    local _
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    log "Kueue stopped (pid $pid)"
  fi
  rm -f "$state/pid"
}

case ${1:-} in
  build) build ;;
  up) up ;;
  down) down ;;
  *) die "usage: hack/peers/kueue.sh build|up|down" ;;
esac
