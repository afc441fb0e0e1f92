#!/usr/bin/env bash
# e2e: two replicas of the controller. Only the Lease holder acts; when it stops (SIGTERM: it
# gives the Lease up) the standby takes over within seconds and goes on where the store says,
# and Jobs submitted before and after the hand-over all complete. (Both share one SQLite file on
# this machine; in a cluster two replicas share a PostgreSQL store.)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-ha
echo "test-muster-ha" >&2
standby_pid=""
cleanup() {
  [[ -n $standby_pid ]] && kill -TERM "$standby_pid" 2>/dev/null && wait "$standby_pid" 2>/dev/null || true
  muster_down
}
trap cleanup EXIT
muster_up
"$MUSTER_BIN" controller --kubeconfig "$muster_dir/controller.kubeconfig" \
  --store "sqlite:$muster_dir/muster.db" --identity e2e-standby --lease-seconds 6 \
  --metrics-addr "127.0.0.1:$(free_port)" >"$MUSTER_CLUSTER_DIR/logs/muster-standby.log" 2>&1 &
standby_pid=$!
fresh_namespace $ns
holder() { k -n muster-system get lease muster-controller -o jsonpath='{.spec.holderIdentity}'; }
check "the first replica holds the Lease ($(holder))" test "$(holder)" = e2e-controller
queued_job_yaml before 4 run=2 | k -n $ns create -f - >/dev/null
eventually 60 "a Job submitted to the leader completes" job_complete $ns before
check "the standby did nothing (no admission in its log)" bash -c "! grep -q 'recovered from the store' '$MUSTER_CLUSTER_DIR/logs/muster-standby.log'"
# Stop the leader (its webhook goes with it; the standby's is not registered, so submit after).
muster_stop
k delete mutatingwebhookconfiguration muster >/dev/null; k delete validatingwebhookconfiguration muster >/dev/null
eventually 30 "the standby takes the Lease" bash -c "[[ \$('$K8S_BIN/kubectl' -n muster-system get lease muster-controller -o jsonpath='{.spec.holderIdentity}') == e2e-standby ]]"
# Without the webhook the Job is held by hand, as the webhook would have.
queued_job_yaml after 4 run=2 | sed 's/^spec:/spec:\n  suspend: true/; s/^    spec:/    spec:\n      schedulerName: muster/' | k -n $ns create -f - >/dev/null
eventually 60 "a Job submitted after the hand-over completes under the new leader" job_complete $ns after
# At least the first Job's group (a test run before this one may leave a Job of its own behind,
# its namespace still going).
check "the new leader recovered the first Job's history from the store" bash -c \
  "grep 'recovered from the store' '$MUSTER_CLUSTER_DIR/logs/muster-standby.log' | grep -Eq 'groups=[1-9]'"
check "the stopped leader gave the store lease up: the standby did not wait for it to lapse" bash -c \
  "! grep -q 'waiting for the store lease' '$MUSTER_CLUSTER_DIR/logs/muster-standby.log'"
k delete namespace $ns --wait=false >/dev/null
