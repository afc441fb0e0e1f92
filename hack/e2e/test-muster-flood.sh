#!/usr/bin/env bash
# e2e: the webhook under AdmissionReviews forged by anyone who can reach its port (any pod, where
# the CNI enforces no NetworkPolicy; the apiserver presents no client certificate). Replayed
# against the real controller on the control plane:
#
#   1  500 reviews, each of a made-up kind and with 1 MiB of padding, 8 at a time: the webhook's
#      resident memory grows by less than 64 MiB, its /metrics stays under 64 KiB with at most a
#      dozen kind labels, and each review is answered
#   2  a 16 MiB body is refused (413) before it is read whole, and the webhook still answers
#   3  300 reviews of pods in a victim's namespace, each naming a made-up group: they cost the
#      apiserver fewer than 30 GETs of Groups under muster's identity (its /metrics)
#   4  a review of a pod naming the victim's Job's group is refused without saying whose group
#      it is (the Job's kind or name)
#   5  afterwards a tenant's queued Job is still held by the webhook and runs
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-muster-flood" >&2
victim=e2e-flood-victim
tmp=$(mktemp -d)
cleanup() {
  muster_down
  k delete namespace $victim --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

muster_up
port=$(cat "$muster_dir/port")
pid=$(cat "$muster_dir/pid")
url=https://127.0.0.1:$port
post() { # post PATH FILE: the HTTP status of a POST of FILE, its body in $tmp/answer
  curl -sS --cacert "$muster_dir/ca.crt" --max-time 20 -o "$tmp/answer" -w '%{http_code}' \
    -H 'Content-Type: application/json' --data-binary "@$2" "$url/$1" || true
}
rss_kib() { ps -o rss= -p "$pid" | tr -d ' '; }
metrics_bytes() { curl -sS --cacert "$muster_dir/ca.crt" --max-time 5 "$url/metrics" | wc -c; }
kind_labels() {
  curl -sS --cacert "$muster_dir/ca.crt" --max-time 5 "$url/metrics" |
    grep -o 'kind="[^"]*"' | sort -u | wc -l
}
group_gets() { # GETs of Groups the apiserver has served (its /metrics)
  k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="groups"/ && /verb="GET"/ {s += $NF} END {print s + 0}'
}

# review FILE NS KIND OBJECT-JSON [PADDING-BYTES]: an AdmissionReview of a CREATE
review() {
  local file=$1 ns=$2 kind=$3 object=$4 pad=${5:-0}
  python3 - "$file" "$ns" "$kind" "$object" "$pad" <<'PY'
import json, sys, uuid
file, ns, kind, obj, pad = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5])
if pad:
    obj.setdefault("metadata", {}).setdefault("annotations", {})["padding"] = "x" * pad
gv = {"group": "", "version": "v1", "kind": kind}
review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
    "uid": str(uuid.uuid4()), "kind": gv, "requestKind": gv,
    "resource": {"group": "", "version": "v1", "resource": kind.lower() + "s"},
    "namespace": ns, "name": obj.get("metadata", {}).get("name", ""), "operation": "CREATE",
    "userInfo": {"username": "system:serviceaccount:" + ns + ":default"},
    "object": obj, "dryRun": False}}
json.dump(review, open(file, "w"))
PY
}
pod_json() { # pod_json NS NAME GROUP
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"%s","labels":{"muster.dev/queue":"default","muster.dev/group":"%s"}},"spec":{"containers":[{"name":"c","image":"x","resources":{"requests":{"cpu":"100m"}}}]}}' "$2" "$1" "$3"
}

fresh_namespace $victim
k label namespace $victim muster.dev/managed=true >/dev/null
queued_job() { # queued_job NAME PODS SECONDS: a Job in queue default in the victim's namespace
  k -n $victim create -f - >/dev/null <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $1, labels: {muster.dev/queue: default}}
spec:
  parallelism: $2
  completions: $2
  template:
    metadata: {annotations: {kwok.muster.dev/run-seconds: "$3"}}
    spec:
      restartPolicy: Never
      containers: [{name: main, image: kwok-fake, resources: {requests: {cpu: 100m}}}]
YAML
}
queued_job private-train 1 600
eventually 20 "the victim's Job private-train has a Group" k -n $victim get groups.muster.dev private-train

# --- 1: made-up kinds, padded ----------------------------------------------------------------------
rss0=$(rss_kib)
mkdir -p "$tmp/reviews"
for i in $(seq 1 40); do
  review "$tmp/reviews/$i.json" attacker "Kind$RANDOM$i" '{"metadata":{"name":"x"}}' $((1 << 20))
done
statuses=$(for round in $(seq 1 13); do
  for i in $(seq 1 40); do echo "$tmp/reviews/$i.json"; done
done | head -n 500 | xargs -P 8 -I{} curl -sS --cacert "$muster_dir/ca.crt" --max-time 20 -o /dev/null \
  -w '%{http_code}\n' -H 'Content-Type: application/json' --data-binary @{} "$url/validate" 2>/dev/null || true)
answered=$(grep -cE '^(200|429)$' <<<"$statuses" || true)
check "each of 500 forged reviews of made-up kinds (1 MiB each, 8 at a time) is answered (200 or 429): $answered" \
  test "$answered" -eq 500
rss1=$(rss_kib)
echo "  ..   webhook resident memory: ${rss0} KiB before, ${rss1} KiB after" >&2
check "its resident memory grew by less than 64 MiB ($(( (rss1 - rss0) / 1024 )) MiB)" test $(( rss1 - rss0 )) -lt $(( 64 * 1024 ))
check "its /metrics stays under 64 KiB ($(metrics_bytes) bytes)" test "$(metrics_bytes)" -lt 65536
check "with at most 12 kind labels ($(kind_labels))" test "$(kind_labels)" -le 12

# --- 2: a body no apiserver sends ------------------------------------------------------------------
review "$tmp/huge.json" attacker Pod '{"metadata":{"name":"x"}}' $((16 << 20))
rss1=$(rss_kib)
code=$(curl -sS --http1.1 --cacert "$muster_dir/ca.crt" --max-time 20 -o /dev/null -w '%{http_code}' \
  -H 'Content-Type: application/json' --data-binary "@$tmp/huge.json" "$url/validate" 2>/dev/null || true)
# The server answers 413 from the Content-Length, and may close the connection before curl has
# sent the rest (curl then reports no status).
check "a 16 MiB review is refused (413, or the connection closed before it is read; got $code)" \
  bash -c '[[ $1 == 413 || $1 == 000 ]]' _ "$code"
check "unread: resident memory grew by less than 8 MiB ($(( ($(rss_kib) - rss1) / 1024 )) MiB)" \
  test $(( $(rss_kib) - rss1 )) -lt $(( 8 * 1024 ))
check "and the webhook still answers" curl -sS --cacert "$muster_dir/ca.crt" --max-time 5 -o /dev/null "$url/healthz"

# --- 3: made-up group names cost no GET each --------------------------------------------------------
gets0=$(group_gets)
for i in $(seq 1 300); do
  review "$tmp/g.json" $victim Pod "$(pod_json $victim "p$i" "guess-$RANDOM-$i")"
  post validate "$tmp/g.json" >/dev/null
done
gets1=$(group_gets)
check "300 reviews naming made-up groups cost $(( gets1 - gets0 )) GETs of Groups (fewer than 30)" \
  test $(( gets1 - gets0 )) -lt 30

# --- 4: nothing said of whose group it is ------------------------------------------------------------
review "$tmp/probe.json" $victim Pod "$(pod_json $victim probe private-train)"
code=$(post validate "$tmp/probe.json")
message=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["response"].get("status", {}).get("message", ""))' "$tmp/answer" 2>/dev/null || true)
check "a pod naming the victim's group is refused (HTTP $code): $(cut -c1-200 <<<"$message")" \
  grep -q '"allowed": *false' "$tmp/answer"
check "without naming whose it is (no \"Job private-train\" in the message)" bash -c '! grep -q "Job private-train" <<<"$1"' _ "$message"

# --- 5: still serving -----------------------------------------------------------------------------
queued_job after 2 1
check "a queued Job created after the flood is held by the webhook" \
  test "$(k -n $victim get job after -o jsonpath='{.spec.template.spec.schedulerName}')" = muster
eventually 60 "and runs to completion" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $victim get job after -o jsonpath='{.status.succeeded}') == 2 ]]"
pass "muster-flood: the webhook holds under forged reviews"
