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
peer=coscheduling
. "$(dirname "$0")/lib.sh"
SP_DIR=$MUSTER_CACHE/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION
SCHEDULER_NAME=${COSCHEDULING_SCHEDULER_NAME:-coscheduling}
procs=(coscheduling-controller coscheduling-scheduler)

peer_files() { # SRC OUT: the PodGroup CRD; the ElasticQuota one too, without which the controller does not start
  mkdir "$2/crds"
  cp "$1/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" "$2/crds/podgroups.yaml"
  cp "$1/config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml" "$2/crds/elasticquotas.yaml"
}

build() {
  if [[ -x $SP_DIR/kube-scheduler && -x $SP_DIR/controller && -s $SP_DIR/crds/podgroups.yaml ]]; then
    echo "$SP_DIR"; return
  fi
  go_module_build "$SP_DIR" sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION" \
    kube-scheduler=./cmd/scheduler controller=./cmd/controller
}

up() {
  peer_need_cluster
  build >/dev/null
  if peer_all_running "${procs[@]}"; then return 0; fi
  peer_fresh_state "${procs[@]}"
  peer_ports COSCHEDULING_SCHEDULER_PORT COSCHEDULING_CONTROLLER_METRICS_PORT COSCHEDULING_CONTROLLER_PROBE_PORT

  # One identity for both processes (so none of the chart's RBAC is needed).
  peer_identity scheduler-plugins
  peer_serving_cert scheduler-plugins-scheduler

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

  peer_apply_crds "$SP_DIR/crds/"

  log "starting the scheduler-plugins controller v$SCHEDULER_PLUGINS_VERSION: metrics :$COSCHEDULING_CONTROLLER_METRICS_PORT, probes :$COSCHEDULING_CONTROLLER_PROBE_PORT"
  peer_start coscheduling-controller "$SP_DIR/controller" --kubeconfig="$state/kubeconfig" \
    --metricsAddr="127.0.0.1:$COSCHEDULING_CONTROLLER_METRICS_PORT" --probeAddr="127.0.0.1:$COSCHEDULING_CONTROLLER_PROBE_PORT" \
    --qps=100 --burst=200 --workers=4

  log "starting the scheduler-plugins kube-scheduler v$SCHEDULER_PLUGINS_VERSION (schedulerName $SCHEDULER_NAME): https://127.0.0.1:$COSCHEDULING_SCHEDULER_PORT"
  peer_start coscheduling-scheduler "$SP_DIR/kube-scheduler" --config="$state/config.yaml" \
    --authentication-kubeconfig="$state/kubeconfig" --authorization-kubeconfig="$state/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$COSCHEDULING_SCHEDULER_PORT" \
    --tls-cert-file="$state/serving.crt" --tls-private-key-file="$state/serving.key" \
    --client-ca-file="$MUSTER_CLUSTER_DIR/pki/ca.crt" \
    --profiling=false --v=2

  peer_wait_ready coscheduling-controller "http://127.0.0.1:$COSCHEDULING_CONTROLLER_PROBE_PORT/readyz"
  peer_wait_ready coscheduling-scheduler "https://127.0.0.1:$COSCHEDULING_SCHEDULER_PORT/healthz"
  log "coscheduling up (scheduler pid $(cat "$state/coscheduling-scheduler.pid"), controller pid $(cat "$state/coscheduling-controller.pid")); logs: $logs/coscheduling-{scheduler,controller}.log"
}

down() {
  peer_stop coscheduling-scheduler
  peer_stop coscheduling-controller
}

peer_main "$@"
