#!/usr/bin/env bash
# e2e: the controller writes ca.crt of the Secret muster-system/muster-webhook-tls into the
# caBundle of every webhook of its registration when it starts (the chart's registration has none),
# so a registration without it (or with a stale one) is repaired by a restart.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-cabundle
echo "test-muster-cabundle" >&2
cleanup() {
  k -n muster-system delete secret muster-webhook-tls --ignore-not-found >/dev/null 2>&1 || true
  muster_down
}
trap cleanup EXIT
muster_up
fresh_namespace $ns
k -n muster-system create secret generic muster-webhook-tls --from-file=ca.crt="$muster_dir/ca.crt" >/dev/null
bundles() {
  k get mutatingwebhookconfiguration,validatingwebhookconfiguration muster \
    -o jsonpath='{range .items[*]}{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}{end}'
}
want=$(base64 -w0 <"$muster_dir/ca.crt")
# Break the registration: no caBundle on any mutating webhook, so the apiserver cannot trust muster.
n=$(k get mutatingwebhookconfiguration muster -o jsonpath='{range .webhooks[*]}x{end}' | wc -c)
ops=$(for i in $(seq 0 $((n - 1))); do printf '{"op":"remove","path":"/webhooks/%d/clientConfig/caBundle"},' "$i"; done)
k patch mutatingwebhookconfiguration muster --type=json -p "[${ops%,}]" >/dev/null
out=$(queued_job_yaml before 1 | k -n $ns create -f - 2>&1) && fail "a queued Job was admitted without a caBundle: $out"
check "without a caBundle the apiserver cannot call the webhook (fails closed: $(grep -o 'x509[^"]*' <<<"$out" | head -c 80))" \
  grep -q "x509\|certificate" <<<"$out"
muster_kill
muster_start
same() { [[ -z $(bundles | grep -vx "$want") && $(bundles | wc -l) -ge $((n + 1)) ]]; }
eventually 20 "after a restart every webhook's caBundle is ca.crt of the Secret" same
check "the controller logged the update" grep -q "caBundle of the webhook registration updated" "$muster_log"
queued_job_yaml after 1 | k -n $ns create -f - >/dev/null
# Whether it is still suspended depends on how fast muster admits it; the mutation is what shows.
check "a queued Job is admitted through the webhook again (it names muster as its pods' scheduler)" \
  test "$(k -n $ns get job after -o jsonpath='{.spec.template.spec.schedulerName}')" = muster
k delete namespace $ns --wait=false >/dev/null
