#!/usr/bin/env bash
# e2e: muster installed the way docs/deploy.md installs it, running as pods on real nodes.
#   0. Two real nodes (hack/real-nodes.sh), muster's image (hack/image.sh) imported into their
#      containerd, PostgreSQL on this machine's address for the pods.
#   1. helm install: two controller replicas on PostgreSQL and two webhook replicas, all from
#      muster's own image, Ready on the real nodes; the webhook registration names its Service.
#   2. A gang of real containers: the apiserver calls the webhook through its Service, which holds
#      the Job for muster; the leader binds the gang whole and its containers run to their end.
#   3. The leading controller pod is deleted mid-run: the other replica takes the Lease and binds
#      the next gang; the first one finishes.
#   4. helm upgrade to a new chart version with a gang running: every muster pod is replaced, the
#      gang's Group is the same object and the gang finishes; a Job after the upgrade runs whole.
#   Throughout: the over-commit checker, and no pod refused by a kubelet.
# Set MUSTER_IMAGE_ARCHIVE to test another image tarball hack/image.sh made (a release build).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-muster-helm-real" >&2
helm=$("$hack_dir/helm.sh")
chart=$repo_dir/deploy/chart
rel=muster
rns=muster-system       # the release's namespace, as docs/deploy.md installs it
ns=e2e-helm-real        # the users' namespace
dir=$MUSTER_CLUSTER_DIR/helm-real
log_dir=$MUSTER_CLUSTER_DIR/logs
rm -rf "$dir"; mkdir -p "$dir" "$log_dir"
pgdata=""
as_pg=()
pg_bin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)")
checker_pid=""
cleanup() {
  stop_process "$checker_pid"
  # The release's pods log to the nodes; keep what they said for a failed run.
  k -n $rns logs deployment/muster --all-containers --prefix >"$log_dir/helm-real-muster.log" 2>&1 || true
  k -n $rns logs deployment/muster-webhook --all-containers --prefix >"$log_dir/helm-real-webhook.log" 2>&1 || true
  "$helm" uninstall $rel -n $rns --wait=false >/dev/null 2>&1 || true
  # While the kubelets still run (run.sh stops the nodes after), so that their pods end and the
  # next test's `muster install` finds no muster-system namespace still terminating.
  k delete namespace $ns $rns --wait=true --timeout=120s --ignore-not-found >/dev/null 2>&1 || true
  if [[ -n $pgdata ]]; then
    "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pgdata/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$pgdata"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 0. nodes, image, store -------------------------------------------------------------------
t0=$(date +%s)
"$hack_dir/real-nodes.sh" up 2 || fail "two real nodes join the cluster (hack/real-nodes.sh up 2)"
pass "two real nodes Ready in $(( $(date +%s) - t0 ))s, kube-proxy on this machine"
# The image of the binary the other tests run (run.sh exports MUSTER_BIN, a debug build that
# `make test` has already compiled): a release build would add a quarter of an hour of compiling.
archive=${MUSTER_IMAGE_ARCHIVE:-$("$hack_dir/image.sh")}
[[ $(basename "$archive") =~ ^muster-(.+)\.tar$ ]] || fail "an image archive named muster-VERSION.tar: $archive"
version=${BASH_REMATCH[1]}
"$hack_dir/real-nodes.sh" import "$archive"
pass "muster's image muster:$version is on both real nodes"

host_ip=$(host_ipv4)
[[ -x $pg_bin/pg_ctl ]] || fail "PostgreSQL server binaries (apt-get install postgresql)"
pgdata=$(mktemp -d /tmp/muster-helm-real-pg.XXXXXX)
if (( EUID == 0 )); then chown postgres "$pgdata"; as_pg=(runuser -u postgres --); fi
pg_port=$(free_port)
"${as_pg[@]}" "$pg_bin/initdb" -D "$pgdata/data" -A trust -U muster >/dev/null
# The pods come from the real nodes' bridges (10.88.0.0/16), masqueraded or not.
printf 'host all all 10.88.0.0/16 trust\nhost all all %s/32 trust\n' "$host_ip" >>"$pgdata/data/pg_hba.conf"
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pgdata/data" -l "$pgdata/log" -w \
  -o "-p $pg_port -k $pgdata -c listen_addresses=127.0.0.1,$host_ip" start >/dev/null
"$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U muster muster
pass "PostgreSQL on $host_ip:$pg_port for the controller's pods"

remove_unreleased_muster
k delete namespace $rns --ignore-not-found --wait=true --timeout=120s >/dev/null
resolve_harness_bin
overcommit_watch "$dir" "$MUSTER_HARNESS_BIN" overcommit

# --- 1. install -------------------------------------------------------------------------------
k create namespace $rns >/dev/null
k -n $rns create secret generic muster-store --from-literal=url="postgres://muster@$host_ip:$pg_port/muster" >/dev/null
# Requests cut to what two 1500m nodes hold beside the gangs; the image is imported, not pulled.
values=(--set "replicaCount=2,store.kind=postgres,image.tag=$version,image.pullPolicy=Never"
        --set-string "nodeSelector.muster\.dev/real-node=true"
        --set "controller.resources.requests.cpu=100m,controller.resources.requests.memory=128Mi"
        --set "webhook.resources.requests.cpu=50m,webhook.resources.requests.memory=64Mi")
t0=$(date +%s)
"$helm" install $rel "$chart" -n $rns "${values[@]}" --wait --timeout 240s >"$dir/install.out" 2>&1 ||
  fail "helm install --wait: $(tail -5 "$dir/install.out"); pods: $(k -n $rns get pods -o wide 2>&1)"
pass "helm install --wait: every muster pod Ready in $(( $(date +%s) - t0 ))s"
pods_on_real_nodes() {
  k -n $rns get pods -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase}{"\n"}{end}' |
    awk '$1 !~ /^muster-real-/ || $2 != "Running" {bad++} END {exit bad > 0 || NR != 4}'
}
check "two controller and two webhook pods run on the real nodes" pods_on_real_nodes
check "the webhook registration calls the Service muster-webhook" test \
  "$(k get mutatingwebhookconfiguration muster -o jsonpath='{.webhooks[0].clientConfig.service.name}')" = muster-webhook
leader() { k -n $rns get lease muster-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
is_pod() { [[ -n $1 ]] && k -n $rns get pod "$1" >/dev/null 2>&1; }
led() { is_pod "$(leader)"; }
eventually 60 "a controller pod holds the Lease muster-controller" led
first_leader=$(leader)

# --- 2. a gang of real containers ---------------------------------------------------------------
# real_job NAME PODS CPU SECONDS: a queued Job of real containers on the real nodes
real_job() {
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $1, labels: {muster.dev/queue: default}}
spec:
  parallelism: $2
  completions: $2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      nodeSelector: {muster.dev/real-node: "true"}
      containers:
      - name: main
        image: $NODE_IMAGE
        imagePullPolicy: Never
        command: [/muster-pod, run, "$4"]
        resources: {requests: {cpu: $3, memory: 32Mi}, limits: {cpu: $3, memory: 32Mi}}
YAML
}
fresh_namespace $ns
k label namespace $ns muster.dev/managed=true >/dev/null
# kube-proxy programs the Service's ClusterIP a moment after helm saw the pods Ready; until then the
# apiserver's call goes nowhere, or to whatever else answers on that address, and a Job is refused.
webhook_serves() {
  [[ $(real_job probe 1 250m 1 | k -n $ns create --dry-run=server -f - \
         -o jsonpath='{.spec.template.spec.schedulerName}' 2>/dev/null) == muster ]]
}
eventually 60 "the apiserver reaches the webhook through its Service (a server-side dry run is mutated)" webhook_serves
real_job gang 4 250m 25 | k -n $ns create -f - >/dev/null
check "the apiserver reached the webhook through its Service: the Job is held for muster" \
  test "$(k -n $ns get job gang -o jsonpath='{.spec.template.spec.schedulerName}')" = muster
runs_whole $ns gang job-name=gang 4

# --- 3. the leader goes -----------------------------------------------------------------------------
k -n $rns delete pod "$first_leader" --wait=false >/dev/null
new_leader() { local h; h=$(leader); [[ -n $h && $h != "$first_leader" ]] && is_pod "$h"; }
eventually 60 "another controller pod takes the Lease from $first_leader" new_leader
pass "the Lease is held by $(leader)"
real_job next 2 250m 5 | k -n $ns create -f - >/dev/null
runs_whole $ns next job-name=next 2
eventually 60 "the next gang finishes" job_complete $ns next
eventually 90 "the first gang finishes" job_complete $ns gang

# --- 4. upgrade with a gang running ------------------------------------------------------------------
real_job during 2 250m 40 | k -n $ns create -f - >/dev/null
runs_whole $ns during job-name=during 2
uid=$(k -n $ns get groups.muster.dev during -o jsonpath='{.metadata.uid}')
before=$(k -n $rns get pods -o jsonpath='{.items[*].metadata.uid}')
cp -r "$chart" "$dir/chart-next"
sed -i 's/^version: .*/version: 0.1.1-e2e/' "$dir/chart-next/Chart.yaml"
"$helm" upgrade $rel "$dir/chart-next" -n $rns "${values[@]}" --set-string podAnnotations.e2e\\.muster\\.dev/revision=2 \
  --wait --timeout 240s >"$dir/upgrade.out" 2>&1 || fail "helm upgrade --wait: $(tail -5 "$dir/upgrade.out")"
check "helm upgrade made revision 2 of chart 0.1.1-e2e" \
  test "$("$helm" list -n $rns -o json | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print(r["revision"], r["chart"])')" = "2 muster-0.1.1-e2e"
replaced() {
  local uid
  for uid in $(k -n $rns get pods --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.uid}'); do
    [[ " $before " == *" $uid "* ]] && return 1
  done
  pods_on_real_nodes
}
eventually 120 "every muster pod was replaced, and the new ones run on the real nodes" replaced
check "the running gang's Group is the same object" \
  test "$(k -n $ns get groups.muster.dev during -o jsonpath='{.metadata.uid}')" = "$uid"
eventually 120 "the gang that ran through the upgrade finishes" job_complete $ns during
eventually 60 "the upgraded webhook serves through its Service" webhook_serves
real_job after 2 250m 5 | k -n $ns create -f - >/dev/null
runs_whole $ns after job-name=after 2
eventually 60 "the gang after the upgrade finishes" job_complete $ns after

# --- throughout ---------------------------------------------------------------------------------------
refused=$(k get pods -A -o jsonpath='{range .items[?(@.status.phase=="Failed")]}{.metadata.namespace}/{.metadata.name} {.status.reason}: {.status.message}{"\n"}{end}' |
  grep "Pod was rejected" || true)
check "no kubelet refused a pod${refused:+: $refused}" test -z "$refused"
overcommit_verdict "$dir" 60
