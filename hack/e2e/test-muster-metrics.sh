#!/usr/bin/env bash
# e2e: the controller's /metrics behind Kubernetes tokens (`muster controller --metrics-auth`, the
# chart's default), on the real apiserver: no token and a token the apiserver does not know get
# 401, a ServiceAccount without `get` on the non-resource URL /metrics gets 403, one bound to a
# ClusterRole that grants it gets the metrics; /healthz needs no token.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-muster-metrics" >&2
ns=e2e-metrics
export MUSTER_CONTROLLER_ARGS=--metrics-auth
cleanup_rbac() {
  k delete clusterrolebinding e2e-metrics-reader --ignore-not-found >/dev/null 2>&1 || true
  k delete clusterrole e2e-metrics-reader --ignore-not-found >/dev/null 2>&1 || true
}
muster_in_namespace $ns
trap 'muster_down; cleanup_rbac; k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true' EXIT

url="http://127.0.0.1:$(cat "$muster_dir/metrics-port")"
# code PATH [TOKEN]: the HTTP status of GET PATH, with TOKEN as bearer
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 ${2:+-H "Authorization: Bearer $2"} "$url$1"; }

k -n $ns create serviceaccount scraper >/dev/null
k -n $ns create serviceaccount stranger >/dev/null
k create clusterrole e2e-metrics-reader --non-resource-url=/metrics --verb=get >/dev/null
k create clusterrolebinding e2e-metrics-reader --clusterrole=e2e-metrics-reader --serviceaccount=$ns:scraper >/dev/null
scraper=$(k -n $ns create token scraper)
stranger=$(k -n $ns create token stranger)

check "/healthz answers without a token" test "$(code /healthz)" = 200
check "/metrics without a token: 401" test "$(code /metrics)" = 401
check "/metrics with a token the apiserver does not know: 401" test "$(code /metrics not-a-kubernetes-token)" = 401
check "/metrics for a user without get on /metrics: 403" test "$(code /metrics "$stranger")" = 403
eventually 20 "/metrics for a user bound to a role with get on /metrics: 200" \
  bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $scraper' $url/metrics) == 200 ]]"
check "... and it is the metrics" \
  bash -c "curl -s -H 'Authorization: Bearer $scraper' $url/metrics | grep -q '^muster_leader '"
pass "the controller's metrics answer only Kubernetes users allowed them"
