#!/usr/bin/env bash
# e2e: muster's Helm chart (deploy/chart) with the real helm (hack/helm.sh).
#   1. helm lint; a bad value is refused, naming the value and the fix.
#   2. The default and an HA rendering (two replicas on PostgreSQL) validated by the apiserver
#      (server-side dry run), the policy on muster's pod writes among them.
#   3. helm install into a namespace of its own. KWOK nodes run no containers, so muster then runs
#      here, as the chart's ServiceAccount, with the exact arguments of the chart's containers
#      (init container, controller, webhook): it makes the webhook's certificate into the chart's
#      Secret, fills the registration's caBundle, and admits and binds a gang.
#   4. helm upgrade to a new chart version with the gang running: the certificate, caBundle and
#      Group are kept, the CRDs updated in place, and the gang finishes; a new Job is admitted.
#   5. helm uninstall: the registration goes, the CRDs and Queues stay.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-helm" >&2
helm=$("$hack_dir/helm.sh")
chart=$repo_dir/deploy/chart
rel=muster
rns=e2e-helm-system   # the release's namespace: not muster-system, so nothing relies on it
ns=e2e-helm           # the users' namespace
dir=$MUSTER_CLUSTER_DIR/helm-e2e
log_dir=$MUSTER_CLUSTER_DIR/logs
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  "$helm" uninstall $rel -n $rns --wait=false >/dev/null 2>&1 || true
  k delete namespace $ns $rns --wait=false --ignore-not-found >/dev/null 2>&1 || true
}
trap cleanup EXIT
quiet() { "$@" >/dev/null 2>&1; }
rm -rf "$dir"; mkdir -p "$dir" "$log_dir"

remove_unreleased_muster

# 1. lint, and values that cannot work
check "helm lint passes" "$helm" lint "$chart" --quiet
refused "two replicas on SQLite" "replicaCount 2 needs store.kind postgres" \
  "$helm" template $rel "$chart" --set replicaCount=2
refused "no webhook replica" "webhook.replicaCount 0: the webhook fails closed" \
  "$helm" template $rel "$chart" --set webhook.replicaCount=0
refused "a pod network that is no CIDR" 'networkPolicy.podCIDRs: "10.244.0.0" is not a CIDR' \
  "$helm" template $rel "$chart" --set 'networkPolicy.podCIDRs={10.244.0.0}'
refused "a webhook URL over plain HTTP" 'webhook.url "http://127.0.0.1:8443": the API server calls webhooks over HTTPS only' \
  "$helm" template $rel "$chart" --set webhook.url=http://127.0.0.1:8443

# 2. renderings the apiserver accepts (hooks apart: the Queue's CRD comes with the release)
k create namespace $rns >/dev/null
for values in "" "--set replicaCount=2,store.kind=postgres,dashboard.enabled=true,dashboard.expose=true"; do
  # shellcheck disable=SC2086 # $values is a list of flags
  "$helm" template $rel "$chart" -n $rns --no-hooks $values >"$dir/rendered.yaml"
  check "the rendering with values '${values:-default}' passes a server-side dry run" \
    bash -c "'$K8S_BIN/kubectl' apply --server-side --dry-run=server -f '$dir/rendered.yaml' >'$dir/dry-run.out' 2>&1"
done
grep -q "poddisruptionbudget.policy/muster serverside-applied" "$dir/dry-run.out" && grep -q "service/muster-dashboard serverside-applied" "$dir/dry-run.out" ||
  fail "the HA rendering has a PodDisruptionBudget and the dashboard's Service: $(cat "$dir/dry-run.out")"
check "the rendering has the policy on muster's pod writes, for the release's ServiceAccount" \
  grep -q "request.userInfo.username == 'system:serviceaccount:$rns:muster'" "$dir/rendered.yaml"
for kind in validatingadmissionpolicy validatingadmissionpolicybinding; do
  grep -q "$kind.admissionregistration.k8s.io/muster-pod-writes serverside-applied" "$dir/dry-run.out" ||
    fail "the apiserver accepts the $kind muster-pod-writes: $(cat "$dir/dry-run.out")"
done
"$helm" template $rel "$chart" -n $rns --no-hooks --set replicaCount=2,store.kind=postgres >"$dir/postgres.yaml"
check "on PostgreSQL the controller reads the URL from the Secret's mounted file, not its command line" \
  test "$(python3 - "$dir/postgres.yaml" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "muster":
        spec = d["spec"]["template"]["spec"]
        c = next(c for c in spec["containers"] if c["name"] == "controller")
        mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/muster/store")
        secret = next(v for v in spec["volumes"] if v["name"] == mount["name"])["secret"]["secretName"]
        store = [a for a in c["args"] if a.startswith("--store")]
        print(store, secret, [e["name"] for e in c.get("env", []) if "STORE" in e["name"]])
PY
)" = "['--store-url-file=/etc/muster/store/url'] muster-store []"
# The webhook apart from the controller, kept up through rollouts and drains, and reachable from
# outside the pod networks only.
"$helm" template $rel "$chart" -n $rns --no-hooks --set 'networkPolicy.podCIDRs={10.244.0.0/16,fd00:10:244::/56}' \
  >"$dir/rendered.yaml"
check "the default rendering passes a server-side dry run with the pod networks set" \
  bash -c "'$K8S_BIN/kubectl' apply --server-side --dry-run=server -f '$dir/rendered.yaml' >'$dir/dry-run.out' 2>&1"
for object in deployment.apps/muster-webhook poddisruptionbudget.policy/muster-webhook \
  networkpolicy.networking.k8s.io/muster-webhook networkpolicy.networking.k8s.io/muster; do
  grep -q "$object serverside-applied" "$dir/dry-run.out" || fail "the default rendering has $object: $(cat "$dir/dry-run.out")"
done
check "the webhook runs two replicas, rolled with none unavailable" test "$(python3 - "$dir/rendered.yaml" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "muster-webhook":
        print(d["spec"]["replicas"], d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"])
PY
)" = "2 0"
check "the webhook's port is open to every address but the pod networks" grep -qF 'except: ["10.244.0.0/16"]' "$dir/rendered.yaml"
k delete namespace $rns --wait=true >/dev/null

# 3. install; run muster as the chart's pods would
port=$(free_port) metrics_port=$(free_port)
values=(--set "webhook.url=https://127.0.0.1:$port,webhook.port=$port,metrics.port=$metrics_port")
"$helm" install $rel "$chart" -n $rns --create-namespace "${values[@]}" --wait=false >"$dir/install.out" 2>&1 ||
  fail "helm install: $(cat "$dir/install.out")"
pass "helm install (chart $(k -n $rns get deployment muster -o jsonpath='{.metadata.labels.helm\.sh/chart}'))"
check "the install made the Queue default (its post-install hook)" quiet k get queues.muster.dev default
check "the chart made the webhook's Secret empty, for muster to fill" \
  test -z "$(k -n $rns get secret muster-webhook-tls -o jsonpath='{.data}')"

# A kubeconfig of the chart's ServiceAccount: what the pods would run as.
k config view --raw --minify --flatten >"$dir/kubeconfig"
KUBECONFIG=$dir/kubeconfig k config set-credentials muster --token="$(k -n $rns create token muster --duration=2h)" >/dev/null
KUBECONFIG=$dir/kubeconfig k config set-context --current --user=muster --namespace=$rns >/dev/null
# The arguments of each container of the installed Deployment, with its paths moved under $dir
# and its listeners on loopback.
"$helm" get manifest $rel -n $rns >"$dir/manifest.yaml"
args_of() {
  python3 - "$dir/manifest.yaml" "$1" "$dir" <<'PY'
import sys, yaml
manifest, name, base = sys.argv[1:4]
for doc in yaml.safe_load_all(open(manifest)):
    if doc and doc["kind"] == "Deployment":
        spec = doc["spec"]["template"]["spec"]
        for c in spec.get("initContainers", []) + spec["containers"]:
            if c["name"] == name:
                for a in c["args"]:
                    print(a.replace("/etc/muster/tls", base + "/tls").replace("/var/lib/muster", base + "/data")
                           .replace("0.0.0.0:", "127.0.0.1:"))
                # The certificate's init container is in both Deployments, alike.
                sys.exit(0)
PY
}
mkdir -p "$dir/data"
mapfile -t cert_args < <(args_of webhook-cert)
mapfile -t controller_args < <(args_of controller)
mapfile -t webhook_args < <(args_of webhook)
(( ${#cert_args[@]} && ${#controller_args[@]} && ${#webhook_args[@]} )) || fail "the Deployment lacks a container"
out=$("$MUSTER_BIN" "${cert_args[@]}" --kubeconfig "$dir/kubeconfig" 2>&1) || fail "muster webhook-cert: $out"
check "the init container's command makes the certificate into the Secret ($out)" grep -q "configured" <<<"$out"
issued=$(k -n $rns get secret muster-webhook-tls -o jsonpath='{.data.tls\.crt}')
out=$("$MUSTER_BIN" "${cert_args[@]}" --kubeconfig "$dir/kubeconfig" 2>&1) || fail "muster webhook-cert: $out"
check "a second replica takes the same certificate ($out)" \
  test "$(grep -c unchanged <<<"$out")/$(k -n $rns get secret muster-webhook-tls -o jsonpath='{.data.tls\.crt}')" = "1/$issued"
check "the written key is private" test "$(stat -c %a "$dir/tls/tls.key")" = 600
# Renewal: a certificate a day from its end is issued again from the same CA (the caBundle stays).
secret_key() { k -n $rns get secret muster-webhook-tls -o jsonpath="{.data.${1//./\\.}}"; }
check "the Secret keeps the CA's key and both expiry times" \
  test -n "$(secret_key ca.key)" -a -n "$(secret_key tls.not-after)" -a -n "$(secret_key ca.not-after)"
ca_before=$(secret_key ca.crt)
k -n $rns patch secret muster-webhook-tls --type=merge \
  -p "{\"data\":{\"tls.not-after\":\"$(printf %s $(( $(date +%s) + 86400 )) | base64 -w0)\"}}" >/dev/null
out=$("$MUSTER_BIN" "${cert_args[@]}" --kubeconfig "$dir/kubeconfig" 2>&1) || fail "muster webhook-cert: $out"
check "a certificate a day from its end is renewed ($out)" grep -q "a renewed certificate" <<<"$out"
check "... from the same CA" test "$(secret_key ca.crt)" = "$ca_before"
check "... as a new certificate, written for the webhook" \
  test "$(secret_key tls.crt)" != "$issued" -a "$(base64 -w0 <"$dir/tls/tls.crt")" = "$(secret_key tls.crt)"
issued=$(secret_key tls.crt)

start() { # start NAME ARGS...: a muster process, logged, stopped on exit
  local name=$1; shift
  "$MUSTER_BIN" "$@" --kubeconfig "$dir/kubeconfig" >>"$log_dir/helm-$name.log" 2>&1 &
  pids+=($!)
}
# Checking its certificate every 2 s rather than hourly, for the renewal below.
start webhook "${webhook_args[@]}" --renew-every=2
start controller "${controller_args[@]}"
bundles() {
  k get mutatingwebhookconfiguration,validatingwebhookconfiguration muster \
    -o jsonpath='{range .items[*]}{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}{end}'
}
want=$(k -n $rns get secret muster-webhook-tls -o jsonpath='{.data.ca\.crt}')
filled() { [[ -n $(bundles) && -z $(bundles | grep -vx "$want") ]]; }
eventually 30 "the controller fills every webhook's caBundle with the Secret's CA" filled
eventually 30 "the webhook serves with the certificate muster made" \
  curl -sf --max-time 2 --cacert <(base64 -d <<<"$want") "https://127.0.0.1:$port/healthz" -o /dev/null
# The running webhook renews a certificate near its end itself and serves the new one, no restart.
k -n $rns patch secret muster-webhook-tls --type=merge \
  -p "{\"data\":{\"tls.not-after\":\"$(printf %s $(( $(date +%s) + 86400 )) | base64 -w0)\"}}" >/dev/null
renewed() { [[ $(secret_key tls.crt) != "$issued" ]]; }
eventually 30 "the running webhook renews its certificate in the Secret" renewed
check "... from the same CA (the caBundle stays)" test "$(secret_key ca.crt)" = "$ca_before"
pem() { tr -d '\n' | sed 's/-----END CERTIFICATE-----.*/-----END CERTIFICATE-----/'; }
serves_renewed() {
  [[ $(openssl s_client -connect "127.0.0.1:$port" </dev/null 2>/dev/null | openssl x509 2>/dev/null | pem) == \
     $(secret_key tls.crt | base64 -d | pem) ]]
}
eventually 30 "... and serves it without a restart" serves_renewed
issued=$(secret_key tls.crt)

fresh_namespace $ns
k label namespace $ns muster.dev/managed=true >/dev/null
queued_job_yaml gang 4 run=20 | k -n $ns create -f - >/dev/null
check "the Job was held by the chart's webhook (suspended, for muster's scheduler)" \
  test "$(k -n $ns get job gang -o jsonpath='{.spec.template.spec.schedulerName}')" = muster
runs_whole $ns gang job-name=gang 4

# 4. upgrade to the next chart version while the gang runs
cp -r "$chart" "$dir/chart-next"
sed -i 's/^version: .*/version: 0.1.1-e2e/' "$dir/chart-next/Chart.yaml"
# A change to the CRDs, as a new version of muster brings (a field, a printer column).
sed -i 's|^    helm.sh/resource-policy: keep$|&\n    e2e.muster.dev/chart: next|' "$dir/chart-next/templates/crds.yaml"
uid=$(k -n $ns get groups.muster.dev gang -o jsonpath='{.metadata.uid}')
"$helm" upgrade $rel "$dir/chart-next" -n $rns "${values[@]}" --wait=false >"$dir/upgrade.out" 2>&1 ||
  fail "helm upgrade: $(cat "$dir/upgrade.out")"
check "helm upgrade made revision 2 of chart 0.1.1-e2e" \
  test "$("$helm" list -n $rns -o json | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print(r["revision"], r["chart"])')" = "2 muster-0.1.1-e2e"
check "the CRDs were updated in place (the new chart's change is on them)" \
  test "$(k get crd groups.muster.dev -o jsonpath='{.metadata.annotations.e2e\.muster\.dev/chart}')" = next
check "the certificate muster made is kept" \
  test "$(k -n $rns get secret muster-webhook-tls -o jsonpath='{.data.tls\.crt}')" = "$issued"
check "every webhook's caBundle is kept" filled
check "the running gang's Group is the same object" \
  test "$(k -n $ns get groups.muster.dev gang -o jsonpath='{.metadata.uid}')" = "$uid"
eventually 60 "the gang finishes" job_complete $ns gang
# Long enough to be seen running: a Succeeded Group no longer lists its allocation.
queued_job_yaml after 2 run=10 | k -n $ns create -f - >/dev/null
runs_whole $ns after job-name=after 2

# 5. uninstall
"$helm" uninstall $rel -n $rns >"$dir/uninstall.out" 2>&1 || fail "helm uninstall: $(cat "$dir/uninstall.out")"
check "helm uninstall removes the webhook registration (nothing is left failing closed)" \
  bash -c "! '$K8S_BIN/kubectl' get mutatingwebhookconfiguration muster >/dev/null 2>&1"
check "... and the policy on muster's pod writes" \
  bash -c "! '$K8S_BIN/kubectl' get validatingadmissionpolicy muster-pod-writes >/dev/null 2>&1"
check "the CRDs and the Queue stay (deleting a CRD deletes every Queue, Cohort, Reservation and Group)" \
  quiet k get crd queues.muster.dev cohorts.muster.dev reservations.muster.dev groups.muster.dev
check "the Group of the finished gang stays with its CRD" quiet k -n $ns get groups.muster.dev gang
