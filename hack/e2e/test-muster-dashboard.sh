#!/usr/bin/env bash
# e2e: the dashboard of the plan (muster controller --dashboard-addr), in a real browser
# (headless Chromium) against the controller on the local control plane with a live workload:
# a gang running on the whole cluster, a gang reserved behind it, a small job after them.
#   1. On loopback: the page lists the queue, the waiting and running groups, and the timeline
#      draws running bars on the four nodes and the reserved gang's bars after them; a group's page
#      shows its window and events; the content the page reloads follows the queue. Screenshots
#      are kept in the logs directory.
#   2. Off loopback: no token, no dashboard; a token sees only the namespaces where its bearer may
#      list Groups, and the queues and nodes only with the right to list them; the login form
#      sets the cookie.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-dashboard
other=e2e-dashboard-b
echo "test-muster-dashboard" >&2
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || fail "no chromium on PATH (apt-get install chromium)"
shots=$MUSTER_CLUSTER_DIR/logs/dashboard
rm -rf "$shots"; mkdir -p "$shots"
cleanup() {
  muster_down
  k delete namespace $ns $other --wait=false --ignore-not-found >/dev/null 2>&1 || true
  k delete queue dash --ignore-not-found >/dev/null 2>&1 || true
  k delete clusterrole e2e-dashboard-viewer --ignore-not-found >/dev/null 2>&1 || true
  k delete clusterrolebinding e2e-dashboard-viewer --ignore-not-found >/dev/null 2>&1 || true
}
trap cleanup EXIT
port=$(free_port)
export MUSTER_CONTROLLER_ARGS="--dashboard-addr 127.0.0.1:$port"
muster_up
url=http://127.0.0.1:$port
fresh_namespace $ns
fresh_namespace $other
# Conservative backfill reserves for the waiting gangs, so the timeline has reserved bars.
printf 'apiVersion: muster.dev/v1alpha1\nkind: Queue\nmetadata: {name: dash}\nspec: {policy: {kind: conservative, depth: 4}}\n' |
  k apply -f - >/dev/null
# job NAME PODS CPU RUN NS: a Job of the queue dash declaring its run time
job() {
  job_yaml "$1" "$2" cpu="$3" run="$4" | sed "s/^metadata:/metadata:\n  labels: {muster.dev\/queue: dash}\n  annotations: {muster.dev\/duration-seconds: \"$4\"}/" |
    k -n "$5" create -f - >/dev/null
}
# 6 of each node's 8 cpu: two such gangs cannot run at once, and what earlier tests left behind
# (a pod still terminating on a node of the same name) cannot block the first.
job first 4 6 120 $ns       # a member on each of the 4 nodes
eventually 60 "first runs" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev first -o jsonpath='{.status.phase}') =~ ^(Admitted|Running)$ ]]"
job second 4 6 60 $ns       # the same again: reserved behind first
job third 1 6 30 $other     # in another namespace
eventually 30 "second is reserved" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev second -o jsonpath='{.status.phase}') == Reserved ]]"
plan_has() { curl -sf "$url/api/plan" | python3 -c "import json,sys; p=json.load(sys.stdin); sys.exit(0 if p and len(p['groups']) >= $1 else 1)"; }
eventually 20 "the controller publishes its plan (three groups)" plan_has 3

# 1. the page in a real browser
dom() { # dom PATH NAME: the page's DOM after its scripts ran, and a screenshot
  "$browser" --headless --no-sandbox --disable-gpu --window-size=1300,1000 --screenshot="$shots/$2.png" "$url$1" >/dev/null 2>&1
  "$browser" --headless --no-sandbox --disable-gpu --dump-dom "$url$1" 2>/dev/null >"$shots/$2.html"
}
dom / plan
count() { grep -o "$1" "$shots/plan.html" | wc -l; }
check "the page lists queue dash" grep -q '<tr class="queue"><td>dash</td>' "$shots/plan.html"
check "the page lists two waiting groups with their positions ($(count '<tr class="waiting">'))" test "$(count '<tr class="waiting">')" -eq 2
check "the page lists the running group" grep -q "e2e-dashboard/first</a>" "$shots/plan.html"
check "the waiting gang's estimated start is when first ends (in about 2m)" \
  grep -qE 'e2e-dashboard/second</a></td><td>4</td><td>in (1|2)m' "$shots/plan.html"
check "the timeline has running bars on the four nodes ($(count 'class="bar running"'))" test "$(count 'class="bar running"')" -eq 4
check "the timeline has the reserved gang's bars on the four nodes ($(count 'class="bar reserved"'))" \
  test "$(count 'class="bar reserved" data-group="e2e-dashboard/second"')" -eq 4
check "the nodes table shows each node's cpu in use" test "$(grep -o '6 / 8</td>' "$shots/plan.html" | wc -l)" -ge 4
check "a screenshot of the page is kept ($shots/plan.png, $(stat -c %s "$shots/plan.png") bytes)" \
  test "$(stat -c %s "$shots/plan.png")" -gt 20000
dom /groups/$ns/second group
check "a group's page shows its reserved window on the nodes" grep -q "<th>window</th><td>reserved from in" "$shots/group.html"
check "a group's page lists its events" grep -q '<tr class="event">' "$shots/group.html"
fragment() { curl -sf -H 'X-Muster-Fragment: 1' "$url/"; }
check "the page reloads its content from the fragment (no whole document)" bash -c "! curl -sf -H 'X-Muster-Fragment: 1' '$url/' | grep -q '<html'"
job fourth 1 6 30 $ns
eventually 20 "the reloaded content shows a group submitted after the page was opened" bash -c "curl -sf -H 'X-Muster-Fragment: 1' '$url/' | grep -q 'e2e-dashboard/fourth'"

# 2. off loopback: the caller's token decides
muster_kill
port=$(free_port)
export MUSTER_CONTROLLER_ARGS="--dashboard-addr 0.0.0.0:$port"
muster_start
url=http://127.0.0.1:$port
eventually 40 "the restarted controller publishes its plan" bash -c \
  "curl -sf -H \"Authorization: Bearer \$('$K8S_BIN/kubectl' -n muster-system create token muster)\" $url/api/plan | grep -q first"
check "without a token the plan is refused (401)" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/api/plan")" = 401
check "without a token the page sends the browser to the login form" \
  test "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$url/")" = "303 $url/login"
check "a token the API server does not accept is refused (401)" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer not-a-token' "$url/api/plan")" = 401
k -n $ns create serviceaccount alice >/dev/null
k -n $ns create role list-groups --verb=list --resource=groups.muster.dev >/dev/null
k -n $ns create rolebinding alice --role=list-groups --serviceaccount=$ns:alice >/dev/null
k -n $ns create serviceaccount nobody >/dev/null
k -n $ns create serviceaccount admin >/dev/null
k create clusterrole e2e-dashboard-viewer --verb=list --resource=groups.muster.dev,queues.muster.dev,nodes >/dev/null
k create clusterrolebinding e2e-dashboard-viewer --clusterrole=e2e-dashboard-viewer --serviceaccount=$ns:admin >/dev/null
seen_by() { # seen_by ACCOUNT: namespaces of the groups, queues and nodes it sees, one line
  curl -sf -H "Authorization: Bearer $(k -n $ns create token "$1")" "$url/api/plan" | python3 -c '
import json, sys
p = json.load(sys.stdin)
print(",".join(sorted({g["key"]["namespace"] for g in p["groups"]})), len(p["queues"]) > 0, len(p["nodes"]))'
}
check "alice (may list Groups in $ns only) sees $ns's groups, no queues, no nodes: $(seen_by alice)" \
  test "$(seen_by alice)" = "$ns False 0"
check "an account with no rights sees nothing: $(seen_by nobody)" test "$(seen_by nobody)" = " False 0"
check "an account that may list Groups, Queues and Nodes everywhere sees all: $(seen_by admin)" \
  test "$(seen_by admin)" = "$ns,$other True 4"
token=$(k -n $ns create token alice)
cookie=$(curl -s -o /dev/null -D - -d "token=$token" "$url/login" | tr -d '\r' | sed -n 's/^set-cookie: \(muster_token=[^;]*\).*/\1/ip')
check "the login form sets the token's cookie" test -n "$cookie"
page=$(curl -sf -b "$cookie" "$url/")
check "with the cookie the page shows alice's groups and not the other namespace's" \
  bash -c "grep -q 'e2e-dashboard/second' <<<'$page' && ! grep -q '$other/third' <<<'$page'"
check "a group alice may not see is not found (404)" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -b "$cookie" "$url/groups/$other/third")" = 404
