#!/usr/bin/env bash
# e2e: the dashboard of the plan (muster controller --dashboard-addr), in a real browser
# (headless Chromium) against the controller on the local control plane with a live workload:
# a gang running on the whole cluster, a gang reserved behind it, a small job after them.
#   1. On loopback: the page lists the queue, the waiting and running groups, and the timeline
#      draws running bars on the four nodes and the reserved gang's bars after them; a group's page
#      shows its window and events; the content the page reloads follows the queue. Screenshots
#      are kept in the logs directory.
#      On loopback a request for another host (DNS rebinding) is refused, every page carries the
#      security headers and loads in the browser with no Content-Security-Policy violation, and a
#      request head sent a byte at a time is cut off at the header timeout.
#   2. Off loopback: never plain HTTP (the controller does not start without a certificate), HTTPS
#      with the certificate the controller makes into the Secret muster-dashboard-tls (as in the
#      chart), checked with the Secret's CA by curl and in Chromium. No token, no dashboard; a token made for the
#      API server rather than the dashboard's audience is refused; a token sees only the
#      namespaces where its bearer may list Groups, and the queues and nodes only with the right
#      to list them; the login form needs its CSRF token and sets a Secure, HttpOnly, SameSite
#      cookie. A flood of bad tokens (one repeated, then many made up) costs the API server a
#      bounded number of TokenReviews (counted on its /metrics), the rest answered 429.
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
  k -n muster-system delete secret muster-dashboard-tls --ignore-not-found >/dev/null 2>&1 || true
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
dom() { # dom PATH NAME [FLAGS...]: the page's DOM after its scripts ran (its console in NAME.log), and a screenshot
  local path=$1 name=$2; shift 2
  "$browser" --headless --no-sandbox --disable-gpu "$@" --window-size=1300,1000 --screenshot="$shots/$name.png" "$url$path" >/dev/null 2>&1
  "$browser" --headless --no-sandbox --disable-gpu "$@" --enable-logging=stderr --v=0 --virtual-time-budget=4000 \
    --dump-dom "$url$path" 2>"$shots/$name.log" >"$shots/$name.html"
}
dom / plan
check "the page loads with no Content-Security-Policy violation (no inline script or style)" \
  bash -c "! grep -i 'content security policy' '$shots/plan.log'"
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
check "a request for another host name (DNS rebinding to 127.0.0.1) is refused (403)" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: rebind.example:$port" "$url/api/plan")" = 403
check "a request for localhost on another port (a port-forward's) is answered" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: localhost:18081' "$url/api/plan")" = 200
headers=$(curl -s -o /dev/null -D - "$url/" | tr -d '\r')
has_header() { grep -qi "^$1: $2" <<<"$headers"; }
check "the page forbids framing and inline scripts (Content-Security-Policy)" \
  has_header content-security-policy ".*frame-ancestors 'none'"
check "the page says X-Frame-Options: DENY, nosniff and no referrer" \
  bash -c "grep -qi '^x-frame-options: DENY' <<<'$headers' && grep -qi '^x-content-type-options: nosniff' <<<'$headers' &&
    grep -qi '^referrer-policy: no-referrer' <<<'$headers'"
# A request head sent a byte a second never ends; the dashboard cuts it off at its header timeout (10 s).
slow_loris_closed_after() {
  python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
start = time.time()
s.settimeout(1)
while time.time() - start < 40:
    try:
        if s.recv(1024) == b"":
            break
    except socket.timeout:
        try:
            s.sendall(b"x")
        except OSError:
            break
    except OSError:
        break
print(int(time.time() - start))
PY
}
took=$(slow_loris_closed_after)
check "a request head sent a byte a second is cut off at the header timeout (after ${took}s)" test "$took" -le 13

# 2. off loopback: HTTPS only, and the caller's token decides
muster_kill
port=$(free_port)
refused "the controller does not serve the dashboard off loopback without a certificate" "serves HTTPS only" \
  timeout 20 "$MUSTER_BIN" controller --kubeconfig "$muster_dir/controller.kubeconfig" --store "sqlite:$muster_dir/x.db" \
  --metrics-addr off --dashboard-addr "0.0.0.0:$port"
# The certificate as the chart has it made: the controller makes it into the Secret (which must
# exist, and which muster's RBAC lets it update) and serves it; callers trust the Secret's ca.crt.
k -n muster-system delete secret muster-dashboard-tls --ignore-not-found >/dev/null
k -n muster-system create secret generic muster-dashboard-tls >/dev/null
export MUSTER_CONTROLLER_ARGS="--dashboard-addr 0.0.0.0:$port --dashboard-tls-secret muster-dashboard-tls"
muster_start
url=https://127.0.0.1:$port
tls=$MUSTER_CLUSTER_DIR/muster-e2e/dashboard-tls
mkdir -p "$tls"
secret_file() { k -n muster-system get secret muster-dashboard-tls -o jsonpath="{.data.${1//./\\.}}" | base64 -d >"$tls/$1"; }
eventually 20 "the controller made its certificate into the Secret muster-dashboard-tls" \
  bash -c "[[ -n \$('$K8S_BIN/kubectl' -n muster-system get secret muster-dashboard-tls -o jsonpath='{.data.ca\\.crt}') ]]"
secret_file ca.crt
secret_file tls.crt
c() { curl --cacert "$tls/ca.crt" "$@"; }
muster_token=$(k -n muster-system create token muster --audience muster-dashboard)
eventually 40 "the restarted controller publishes its plan, over HTTPS with the Secret's CA" bash -c \
  "curl -sf --cacert '$tls/ca.crt' -H 'Authorization: Bearer $muster_token' $url/api/plan | grep -q first"
check "plain HTTP on the dashboard's port gets no page" \
  bash -c "! curl -s --max-time 5 -o /dev/null -w '%{http_code}' 'http://127.0.0.1:$port/healthz' | grep -q 200"
spki=$(openssl x509 -in "$tls/tls.crt" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)
profile=$(mktemp -d)
dom /login login --user-data-dir="$profile" --ignore-certificate-errors-spki-list="$spki"
rm -rf "$profile"
check "Chromium opens the sign-in form over HTTPS (the certificate's key pinned)" \
  grep -q '<input type="hidden" name="csrf" value="[0-9a-f]\{64\}">' "$shots/login.html"
check "without a token the plan is refused (401)" test "$(c -s -o /dev/null -w '%{http_code}' "$url/api/plan")" = 401
check "without a token the page sends the browser to the login form" \
  test "$(c -s -o /dev/null -w '%{http_code} %{redirect_url}' "$url/")" = "303 $url/login"
check "a token the API server does not accept is refused (401)" \
  test "$(c -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer not-a-token' "$url/api/plan")" = 401
check "a token made for the API server, not for the dashboard's audience, is refused (401)" \
  test "$(c -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(k -n muster-system create token muster)" "$url/api/plan")" = 401
k -n $ns create serviceaccount alice >/dev/null
k -n $ns create role list-groups --verb=list --resource=groups.muster.dev >/dev/null
k -n $ns create rolebinding alice --role=list-groups --serviceaccount=$ns:alice >/dev/null
k -n $ns create serviceaccount nobody >/dev/null
k -n $ns create serviceaccount admin >/dev/null
k create clusterrole e2e-dashboard-viewer --verb=list --resource=groups.muster.dev,queues.muster.dev,nodes >/dev/null
k create clusterrolebinding e2e-dashboard-viewer --clusterrole=e2e-dashboard-viewer --serviceaccount=$ns:admin >/dev/null
seen_by() { # seen_by ACCOUNT: namespaces of the groups, queues and nodes it sees, one line
  c -sf -H "Authorization: Bearer $(k -n $ns create token "$1" --audience muster-dashboard)" "$url/api/plan" | python3 -c '
import json, sys
p = json.load(sys.stdin)
print(",".join(sorted({g["key"]["namespace"] for g in p["groups"]})), len(p["queues"]) > 0, len(p["nodes"]))'
}
# Each new token is a check of the client's rate limit (10 at once): each account's is made once.
seen=$(seen_by alice)
check "alice (may list Groups in $ns only) sees $ns's groups, no queues, no nodes: $seen" test "$seen" = "$ns False 0"
seen=$(seen_by nobody)
check "an account with no rights sees nothing: $seen" test "$seen" = " False 0"
seen=$(seen_by admin)
check "an account that may list Groups, Queues and Nodes everywhere sees all: $seen" test "$seen" = "$ns,$other True 4"
token=$(k -n $ns create token alice --audience muster-dashboard)
jar=$(mktemp)
form=$(c -s -c "$jar" "$url/login")
csrf=$(sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p' <<<"$form")
check "the login form carries a CSRF token" test ${#csrf} -eq 64
check "signing in without the form's CSRF token is refused (403)" \
  test "$(c -s -o /dev/null -w '%{http_code}' -d "token=$token" "$url/login")" = 403
set_cookie=$(c -s -o /dev/null -D - -b "$jar" --data-urlencode "token=$token" --data-urlencode "csrf=$csrf" "$url/login" |
  tr -d '\r' | grep -i '^set-cookie: __Host-muster_token=')
check "the login form sets the token's cookie: Secure, HttpOnly, SameSite=Strict, Path=/" \
  bash -c "grep -q '; Secure' <<<'$set_cookie' && grep -q '; HttpOnly' <<<'$set_cookie' &&
    grep -q '; SameSite=Strict' <<<'$set_cookie' && grep -q '; Path=/' <<<'$set_cookie'"
cookie=$(sed -n 's/^set-cookie: \(__Host-muster_token=[^;]*\).*/\1/ip' <<<"$set_cookie")
rm -f "$jar"
page=$(c -sf -b "$cookie" "$url/")
check "with the cookie the page shows alice's groups and not the other namespace's" \
  bash -c "grep -q 'e2e-dashboard/second' <<<'$page' && ! grep -q '$other/third' <<<'$page'"
check "a group alice may not see is not found (404)" \
  test "$(c -s -o /dev/null -w '%{http_code}' -b "$cookie" "$url/groups/$other/third")" = 404

# A flood of bad tokens, counted where they would cost: the API server's TokenReviews.
tokenreviews() { k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="tokenreviews"/ {s += $NF} END {print s + 0}'; }
flood=$(mktemp)
request() { # request TOKEN: one request of the flood, as curl's config (-K; `next` parts them)
  printf 'next\nurl = "%s/api/plan"\nheader = "Authorization: Bearer %s"\ncacert = "%s"\n' "$url" "$1" "$tls/ca.crt"
  printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\nsilent\n'
}
{
  for i in $(seq 1 200); do request same-bad-token; done
  for i in $(seq 1 200); do request "made-up-$i"; done
} | tail -n +2 >"$flood"
before=$(tokenreviews)
started=$(date +%s)
codes=$(curl -K "$flood")
took=$(( $(date +%s) - started + 1 ))
after=$(tokenreviews)
rm -f "$flood"
refusals=$(grep -c '^401$' <<<"$codes" || true)
limited=$(grep -c '^429$' <<<"$codes" || true)
check "400 requests with bad tokens are all refused: $refusals with 401, $limited with 429" \
  test $((refusals + limited)) -eq 400 -a "$limited" -gt 0
# One for the repeated token, the 10 of the burst, one a second after: nowhere near 400.
check "they cost the API server $((after - before)) TokenReviews in ${took}s (at most 12 + ${took})" \
  test $((after - before)) -le $((12 + took))
