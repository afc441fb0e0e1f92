#!/usr/bin/env bash
# make e2e: build what is missing, start a private harness cluster, run the e2e tests,
# and stop every process it started (by pid), whether the tests pass or fail.
#
#   hack/e2e/run.sh [TEST...]     (default: all; the list below)
#
# `scale` is seed 002's experiment at a small size (50 jobs); hack/e2e/test-scale.sh runs it at
# any size and with muster as the scheduler.
#
# Peers (docs/peers.md): `peer-kueue`, `peer-coscheduling`, `peer-volcano`, `peer-native` run seed
# 001 under the real Kueue, scheduler-plugins coscheduling, Volcano and kube-scheduler's own gang
# scheduling (hack/e2e/test-peer-NAME.sh; `make peers` runs them all); `peer-kueue-fair` runs the
# real Kueue with its fair sharing on a case the sim's Kueue model pins. The default list keeps Kueue's
# as a smoke test of the peer harness.
#
# The cluster lives in $MUSTER_E2E_DIR (default ~/.cache/muster/e2e-cluster), apart from
# the one `make cluster-up` starts, so the two never disturb each other.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
export MUSTER_CLUSTER_DIR=${MUSTER_E2E_DIR:-$MUSTER_CACHE/e2e-cluster}
export KUBECONFIG=$MUSTER_CLUSTER_DIR/kubeconfig
e2e=$hack_dir/e2e
tests=("$@")
(( ${#tests[@]} )) || tests=(nodes job gang-ready webhook crds admission cli scale muster-unsatisfiable muster-scale muster-restart muster-ha
                                deadlock muster-deadlock muster-nodes muster-pods muster-podgroup muster-native muster-job-shapes muster-run-times muster-run-limit muster-ahead muster-shrink muster-priority muster-job-failures muster-jobset muster-trainjob muster-mpijob muster-rayjob muster-sets muster-composite muster-jobset-gangs muster-real-nodes muster-helm-real muster-reservation muster-cohort muster-lws muster-cabundle muster-dra
                                muster-privilege muster-metrics muster-tenant muster-reclaim muster-tenants-real muster-flood muster-down muster-dashboard helm krew peer-kueue image)

"$hack_dir/cluster-build.sh"
resolve_muster_bin
t0=$(date +%s)
test_pid=""
trap '"$hack_dir/cluster-down.sh"' EXIT
# On Ctrl-C or kill: stop the running test (by pid), then the EXIT trap stops the cluster.
trap '[[ -n $test_pid ]] && kill -TERM "$test_pid" 2>/dev/null; exit 130' INT TERM
# A component dying during startup is the harness's failure, not a test's: one more try, after
# cluster-up.sh has printed how it died.
if ! "$hack_dir/cluster-up.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml" >/dev/null; then
  log "control plane failed to start; trying once more"
  "$hack_dir/cluster-up.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml" >/dev/null
fi

failed=()
# Tests delete their namespaces without waiting; the next one starts once they are gone (at most
# 2 minutes), so that no pod of an earlier test still holds a node a later one assumes empty. A
# namespace still there after that is waited for no more, and the whole run waits 10 minutes at
# most.
given_up=" "
waited_s=0
await_namespaces_gone() {
  local left
  for _ in $(seq 120); do
    left=$("$K8S_BIN/kubectl" get namespaces --no-headers 2>/dev/null |
      awk -v skip="$given_up" '$2 == "Terminating" && index(skip, " " $1 " ") == 0 {print $1}')
    [[ -z $left ]] || (( waited_s >= 600 )) && return 0
    sleep 1
    waited_s=$((waited_s + 1))
  done
  log "namespaces still terminating after 2 minutes, not waited for again: $(echo $left)"
  given_up+="$(echo $left) "
}
# run NAME CMD...: one test, its output also kept in logs/e2e-NAME.log; a failure is recorded and
# the suite goes on
run() {
  local name=$1; shift
  await_namespaces_gone
  rm -f "$MUSTER_CLUSTER_DIR/muster-exited"
  "$@" > >(tee "$MUSTER_CLUSTER_DIR/logs/e2e-$name.log") 2>&1 & test_pid=$!
  if wait "$test_pid"; then :; else failed+=("$name"); fi
  # hack/e2e/muster.sh's muster_down leaves this when the controller had exited by itself
  if [[ -e $MUSTER_CLUSTER_DIR/muster-exited && ! " ${failed[*]} " =~ " $name " ]]; then failed+=("$name"); fi
  test_pid=""
}
for t in "${tests[@]}"; do
  case $t in
    nodes)      run nodes "$e2e/test-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml" ;;
    job)        run job "$e2e/test-job.sh" ;;
    gang-ready) run gang-ready "$e2e/test-gang-ready.sh" ;;
    webhook)    run webhook "$e2e/test-webhook.sh" ;;
    # A Rust integration test (crates/muster-harness/tests/crds.rs), gated on MUSTER_E2E_KUBECONFIG.
    crds)       run crds env MUSTER_E2E_KUBECONFIG="$KUBECONFIG" cargo test -q --workspace --test crds ;;
    admission)  run admission "$e2e/test-admission.sh" ;;
    cli)        run cli "$e2e/test-cli.sh" ;;
    scale)      run scale "$e2e/test-scale.sh" --jobs 50 ;;
    muster-unsatisfiable) run muster-unsatisfiable "$e2e/test-muster-unsatisfiable.sh" ;;
    muster-pods)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-pods "$e2e/test-muster-pods.sh" ;;
    muster-podgroup)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-podgroup "$e2e/test-muster-podgroup.sh" ;;
    muster-native)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-native "$e2e/test-muster-native.sh" ;;
    muster-job-shapes)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-job-shapes "$e2e/test-muster-job-shapes.sh" ;;
    muster-run-times)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-run-times "$e2e/test-muster-run-times.sh" ;;
    muster-run-limit)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-run-limit "$e2e/test-muster-run-limit.sh" ;;
    muster-ahead)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-ahead "$e2e/test-muster-ahead.sh" ;;
    muster-shrink)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-shrink "$e2e/test-muster-shrink.sh" ;;
    muster-priority)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-priority "$e2e/test-muster-priority.sh" ;;
    muster-job-failures)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-job-failures "$e2e/test-muster-job-failures.sh" ;;
    muster-jobset)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-jobset "$e2e/test-muster-jobset.sh" ;;
    # A Kubeflow Trainer TrainJob, against the real Trainer and JobSet controllers.
    muster-trainjob)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-trainjob "$e2e/test-muster-trainjob.sh" ;;
    muster-mpijob)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-mpijob "$e2e/test-muster-mpijob.sh" ;;
    muster-rayjob)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-rayjob "$e2e/test-muster-rayjob.sh" ;;
    # Groups of member sets (an MPIJob's launcher and GPU workers, a RayJob's, a JobSet's) on 8
    # nodes of 8 GPUs, against the real MPI, KubeRay and JobSet operators.
    muster-sets)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/gpu-8.yaml"
      run muster-sets "$e2e/test-muster-sets.sh" ;;
    # A CompositePodGroup (Kubernetes 1.37) of two PodGroups as one group of sets, in racks and a
    # block of 32 nodes of 8 GPUs (a Rust test: crates/muster-harness/tests/composite.rs).
    muster-composite)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/gpu-racks-32.yaml"
      run muster-composite "$e2e/test-muster-composite.sh" ;;
    # Gangs inside a JobSet's group (pod template annotations), in racks and blocks of 32 nodes
    # of 8 GPUs, against the real JobSet controller.
    muster-jobset-gangs)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/gpu-racks-32.yaml"
      run muster-jobset-gangs "$e2e/test-muster-jobset-gangs.sh" ;;
    # Real kubelets and containers beside the KWOK nodes (hack/real-nodes.sh), stopped after.
    muster-real-nodes)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run muster-real-nodes "$e2e/test-muster-real-nodes.sh"
      "$hack_dir/real-nodes.sh" down || failed+=("real-nodes down") ;;
    # The chart installed onto real nodes: muster as pods of its own image (a release build).
    muster-helm-real)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run muster-helm-real "$e2e/test-muster-helm-real.sh"
      "$hack_dir/real-nodes.sh" down || failed+=("real-nodes down") ;;
    # A calendar Reservation of 2 of 4 nodes for one queue over a short window: backfill before
    # it, only its queue inside it, eviction at its opening (a Rust test:
    # crates/muster-harness/tests/reservation.rs).
    muster-reservation)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/reservation-4.yaml"
      run muster-reservation "$e2e/test-muster-reservation.sh" ;;
    # Cohorts with quotas of their own: a department's borrowing limit (a Rust test:
    # crates/muster-harness/tests/cohort.rs).
    muster-cohort)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/reservation-4.yaml"
      run muster-cohort "$e2e/test-muster-cohort.sh" ;;
    # A LeaderWorkerSet's replica groups as gangs, against the real LWS controller.
    muster-lws)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/tenant-4x8.yaml"
      run muster-lws "$e2e/test-muster-lws.sh" ;;
    muster-cabundle) run muster-cabundle "$e2e/test-muster-cabundle.sh" ;;
    # What muster's own identity may do to pods: RBAC and the policy muster-pod-writes.
    muster-privilege)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-privilege "$e2e/test-muster-privilege.sh" ;;
    # The controller's /metrics behind TokenReview and SubjectAccessReview (--metrics-auth).
    muster-metrics) run muster-metrics "$e2e/test-muster-metrics.sh" ;;
    muster-dra)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/tenant-4x8.yaml"
      run muster-dra "$e2e/test-muster-dra.sh" ;;
    # kubectl muster installed by the real krew from hack/krew.sh's manifest; needs no cluster.
    krew) run krew "$e2e/test-krew.sh" ;;
    # The dashboard in headless Chromium (Debian's chromium package).
    muster-dashboard)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run muster-dashboard "$e2e/test-muster-dashboard.sh" ;;
    # The Helm chart (deploy/chart), installed and upgraded with the real helm (hack/helm.sh).
    helm)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run helm "$e2e/test-helm.sh" ;;
    # A killed muster, its webhooks still registered: only muster's work is refused.
    muster-down)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-down "$e2e/test-muster-down.sh" ;;
    # Forged AdmissionReviews sent straight to the webhook's port.
    muster-flood)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run muster-flood "$e2e/test-muster-flood.sh" ;;
    # A hostile tenant replays seven defects muster had (a Rust test:
    # crates/muster-harness/tests/tenant_replays.rs).
    muster-tenant)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/tenant-4x8.yaml"
      run muster-tenant "$e2e/test-muster-tenant.sh" ;;
    muster-reclaim)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/tenant-4x8.yaml"
      run muster-reclaim "$e2e/test-muster-reclaim.sh" ;;
    # tenants-reclaim at 1/60 through the harness: four teams' Queues and namespaces (6 minutes).
    muster-tenants-real)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/gpu-8.yaml"
      run muster-tenants-real "$e2e/test-muster-tenants-real.sh" ;;
    muster-scale)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-scale "$e2e/test-muster-scale.sh" --jobs 100 ;;
    muster-restart)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-restart "$e2e/test-muster-scale.sh" --jobs 100 --kills 3 ;;
    muster-ha) run muster-ha "$e2e/test-muster-ha.sh" ;;
    # Two replicas on PostgreSQL under seed 002's load through six faults (a benchmark, `make
    # faults`; not in the default list: about 10 minutes).
    muster-faults)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml"
      run muster-faults "$e2e/test-muster-faults.sh" ${MUSTER_FAULTS_ARGS:-} ;;
    muster-nodes)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run muster-nodes "$e2e/test-muster-nodes.sh" ;;
    muster-deadlock)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run muster-deadlock "$e2e/test-muster-deadlock.sh" ;;
    peer-kueue|peer-kueue-fair|peer-coscheduling|peer-volcano|peer-native)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run "$t" "$e2e/test-$t.sh" ;;
    deadlock)
      "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run nodes-deadlock "$e2e/test-nodes.sh" "$repo_dir/scenarios/clusters/seed-deadlock.yaml"
      run deadlock "$e2e/test-deadlock.sh" ;;
    # The container image (hack/image-test.sh); needs no cluster. Of the debug MUSTER_BIN
    # resolve_muster_bin exported, as helm-real's, so its size limit is a debug build's:
    # `make image-test` holds the release image to 40 MB.
    image) run image env IMAGE_MAX_MB=80 "$hack_dir/image-test.sh" ;;
    *) die "unknown test: $t" ;;
  esac
done

echo "e2e: ${#tests[@]} test groups in $(( $(date +%s) - t0 ))s; logs in $MUSTER_CLUSTER_DIR/logs" >&2
if (( ${#failed[@]} )); then
  # The end of each failed test's output, last, where a CI log's tail shows it.
  for name in "${failed[@]}"; do
    log=$MUSTER_CLUSTER_DIR/logs/e2e-$name.log
    [[ -f $log ]] || continue
    echo "--- $name (the end of logs/e2e-$name.log)" >&2
    grep -v "^  ok " "$log" | tail -n 30 >&2
  done
  echo "e2e: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "e2e: all passed" >&2
