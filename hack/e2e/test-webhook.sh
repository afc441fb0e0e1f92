#!/usr/bin/env bash
# e2e: the apiserver reaches an admission webhook served on 127.0.0.1 through a url-based
# clientConfig with a caBundle (the shape muster's webhook is registered with).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-webhook
echo "test-webhook" >&2
tmp=$(mktemp -d)
pid=""
cleanup() {
  k delete mutatingwebhookconfiguration muster-e2e-test --ignore-not-found >/dev/null 2>&1 || true
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A CA of the test's own (not the cluster's), so only the caBundle can make TLS verify.
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/ca.key" 2>/dev/null
openssl req -x509 -new -key "$tmp/ca.key" -subj /CN=webhook-test-ca -days 1 -out "$tmp/ca.crt" 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/tls.key" 2>/dev/null
openssl req -new -key "$tmp/tls.key" -subj /CN=127.0.0.1 -out "$tmp/tls.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$tmp/ext"
openssl x509 -req -in "$tmp/tls.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial -days 1 \
  -extfile "$tmp/ext" -out "$tmp/tls.crt" 2>/dev/null

"$TOOLS_BIN/muster-test-webhook" --addr 127.0.0.1:0 --cert "$tmp/tls.crt" --key "$tmp/tls.key" \
  --port-file "$tmp/port" >"$tmp/webhook.log" 2>&1 &
pid=$!
for _ in $(seq 1 50); do [[ -s $tmp/port ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || { cat "$tmp/webhook.log" >&2; fail "webhook did not start"; }
port=$(cat "$tmp/port")
pass "test webhook serving on https://127.0.0.1:$port (pid $pid)"

fresh_namespace $ns
k label namespace $ns e2e.muster.dev/webhook-test=true >/dev/null
cat <<YAML | k create -f - >/dev/null
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: muster-e2e-test
webhooks:
- name: test.e2e.muster.dev
  clientConfig:
    url: https://127.0.0.1:$port/mutate
    caBundle: $(base64 -w0 < "$tmp/ca.crt")
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  namespaceSelector:
    matchLabels: {e2e.muster.dev/webhook-test: "true"}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
YAML
# The apiserver picks up new webhook configurations within a moment; retry briefly.
created() { k -n $ns create configmap probe-$RANDOM --from-literal=a=b -o jsonpath='{.metadata.labels.muster\.dev/webhook-seen}' 2>/dev/null | grep -qx true; }
eventually 20 "a ConfigMap created in the namespace was mutated by the webhook" created
check "the webhook counted its calls" test "$(curl -fsS --cacert "$tmp/ca.crt" "https://127.0.0.1:$port/calls")" -ge 1
k delete namespace $ns --wait=false >/dev/null
