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
# State in $MUSTER_CLUSTER_DIR/kueue/ (certs, kubeconfig, config.yaml, kueue.pid, ports);
# the manager's log is $MUSTER_CLUSTER_DIR/logs/kueue.log.
# KUEUE_PODS_READY_TIMEOUT (default 10m, the value of Kueue's waitForPodsReady page) overrides
# waitForPodsReady.timeout. KUEUE_JOBSET=1 turns on Kueue's JobSet integration too (its CRD and
# controller must be there first: hack/e2e/muster.sh jobset_controller_up).
# KUEUE_FAIR_SHARING=STRATEGY[,STRATEGY] turns on Kueue's fair sharing with those
# preemptionStrategies (hack/suite-real.sh sets it from a scenario's kueue.fairSharing).
set -euo pipefail
peer=kueue
. "$(dirname "$0")/lib.sh"
KUEUE_DIR=$MUSTER_CACHE/kueue-$KUEUE_VERSION
# The CRDs Kueue's own kustomization (config/components/crd) serves through the conversion webhook.
CONVERTED="localqueues clusterqueues cohorts workloads multikueueclusters"
WEBHOOK_NAMES="kueue-mutating-webhook-configuration kueue-validating-webhook-configuration"

peer_files() { # SRC OUT: the CRDs and the webhook manifests
  mkdir "$2/crds"
  cp "$1"/config/components/crd/bases/*.yaml "$2/crds/"
  cp "$1/config/components/webhook/manifests.yaml" "$2/webhooks.yaml"
}

build() {
  if [[ -x $KUEUE_DIR/kueue && -s $KUEUE_DIR/webhooks.yaml && -d $KUEUE_DIR/crds ]]; then
    echo "$KUEUE_DIR"; return
  fi
  go_module_build "$KUEUE_DIR" sigs.k8s.io/kueue "$KUEUE_VERSION" kueue=./cmd/kueue
}

up() {
  peer_need_cluster
  build >/dev/null
  if peer_all_running kueue; then return 0; fi
  peer_fresh_state kueue
  mkdir -p "$state/webhook-certs" "$state/metrics-certs"
  peer_ports KUEUE_WEBHOOK_PORT KUEUE_METRICS_PORT KUEUE_HEALTH_PORT

  peer_identity kueue-controller-manager
  peer_serving_cert kueue-webhook
  cp "$state/serving.crt" "$state/webhook-certs/tls.crt"; cp "$state/serving.key" "$state/webhook-certs/tls.key"
  cp "$state/serving.crt" "$state/metrics-certs/tls.crt"; cp "$state/serving.key" "$state/metrics-certs/tls.key"
  local ca_bundle
  ca_bundle=$(base64 -w0 < "$MUSTER_CLUSTER_DIR/pki/ca.crt")

  # The configuration (docs/peers.md gives the Kueue page each setting follows).
  cat > "$state/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_HEALTH_PORT
metrics:
  bindAddress: 127.0.0.1:$KUEUE_METRICS_PORT
webhook:
  host: 127.0.0.1
  port: $KUEUE_WEBHOOK_PORT
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
$( [[ ${KUEUE_JOBSET:-0} == 1 ]] && echo "  - jobset.x-k8s.io/jobset" )
$( [[ -n ${KUEUE_FAIR_SHARING:-} ]] && printf 'fairSharing:\n  preemptionStrategies: [%s]\n' "$KUEUE_FAIR_SHARING" )
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
  python3 - "$KUEUE_DIR/crds" "https://127.0.0.1:$KUEUE_WEBHOOK_PORT/convert" "$ca_bundle" "$CONVERTED" \
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
  peer_apply_crds "$state/crds.yaml"
  kc create namespace kueue-system --dry-run=client -o yaml | kc apply -f - >/dev/null

  # The manager reads its metrics certificate from the fixed path /etc/kueue/metrics/certs when
  # internal cert management is off. It gets that path in a mount namespace of its own: /etc as
  # an overlay whose upper layer is a tmpfs, the harness's cert bound there. Nothing on the host changes.
  log "starting Kueue v$KUEUE_VERSION: webhook https://127.0.0.1:$KUEUE_WEBHOOK_PORT, metrics :$KUEUE_METRICS_PORT, health :$KUEUE_HEALTH_PORT"
  mkdir -p "$state/ns"
  # shellcheck disable=SC2016  # expanded by the inner bash
  peer_launcher=(unshare --mount --propagation private bash -c '
    set -e; s=$1; shift
    mount -t tmpfs tmpfs "$s/ns"
    mkdir -p "$s/ns/upper" "$s/ns/work"
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$s/ns/upper,workdir=$s/ns/work" /etc
    mkdir -p /etc/kueue/metrics/certs
    mount --bind "$s/metrics-certs" /etc/kueue/metrics/certs
    exec "$@"' kueue-ns "$state")
  peer_start kueue "$KUEUE_DIR/kueue" --config="$state/config.yaml" --kubeconfig="$state/kubeconfig" --zap-log-level=info
  peer_wait_ready kueue "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz"

  # Webhook configurations: Kueue's own manifests (names as its kustomize prefix makes them), each
  # service clientConfig turned into the loopback URL; only the webhooks of Kueue's APIs and of
  # the one enabled integration (batch/job), with Kueue's namespaceSelector (not kube-system,
  # not kueue-system).
  python3 - "$KUEUE_DIR/webhooks.yaml" "https://127.0.0.1:$KUEUE_WEBHOOK_PORT" "$ca_bundle" "${KUEUE_JOBSET:-0}" \
      > "$state/webhooks.yaml" <<'PY'
import sys, yaml
src, base, ca, jobset = sys.argv[1:5]
keep = {"kueue.x-k8s.io", "batch"} | ({"jobset.x-k8s.io"} if jobset == "1" else set())
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
        if groups & {"batch", "jobset.x-k8s.io"}:
            w["namespaceSelector"] = {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]}
        hooks.append(w)
    d["webhooks"] = hooks
    out.append(d)
yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
PY
  kc apply -f "$state/webhooks.yaml" >/dev/null || die "applying Kueue's webhook configurations failed"
  log "Kueue up (pid $(cat "$state/kueue.pid")); log: $logs/kueue.log"
}

down() {
  # Webhooks first: they fail closed once the manager is gone.
  local w
  for w in $WEBHOOK_NAMES; do
    kc delete mutatingwebhookconfiguration "$w" --ignore-not-found >/dev/null 2>&1 || true
    kc delete validatingwebhookconfiguration "$w" --ignore-not-found >/dev/null 2>&1 || true
  done
  peer_stop kueue
}

peer_main "$@"
