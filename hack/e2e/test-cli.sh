#!/usr/bin/env bash
# e2e: `muster queue` and `muster why` against the real apiserver. Group objects are created
# with the statuses the controller would write (server-side apply on the status subresource,
# as admin), then the commands' tables and explanations are checked, including the kubectl
# plugin form (`kubectl muster`), the kubeconfig's namespace, and the answers for a Job that
# muster does not manage and for one that does not exist.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-cli
ns2=e2e-cli-other
echo "test-cli" >&2
resolve_muster_bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
m() { "$MUSTER_BIN" "$@"; }
apply() { k apply --server-side --field-manager=muster-e2e "$@" >/dev/null; }

apply -f "$repo_dir/deploy/chart/templates/crds.yaml"
k wait --for=condition=Established --timeout=60s crd/queues.muster.dev crd/groups.muster.dev >/dev/null
served() { k get queues.muster.dev,groups.muster.dev -A >/dev/null 2>&1; }
eventually 30 "the muster resources are served" served
fresh_namespace $ns
fresh_namespace $ns2
k delete queues.muster.dev $ns --ignore-not-found >/dev/null

# Times the statuses carry, relative to now (the commands print them relative to their now).
at() { date -u -d "@$(( $(date +%s) + $1 ))" +%Y-%m-%dT%H:%M:%SZ; }
in30m=$(at 1800) in5m=$(at 300) ago10m=$(at -600) ago2m=$(at -120)

group() { # group NS NAME QUEUE MEMBERS-YAML
  cat <<YAML
apiVersion: muster.dev/v1alpha1
kind: Group
metadata: {name: $2, namespace: $1}
spec:
  queue: $3
  members: $4
  resources: {cpu: 2, memory: 2Gi}
  owner: {apiVersion: batch/v1, kind: Job, name: $2}
---
YAML
}
status() { # status NS NAME STATUS-YAML: the status as the controller would write it
  apply --subresource=status -f - <<YAML
apiVersion: muster.dev/v1alpha1
kind: Group
metadata: {name: $2, namespace: $1}
status:
$3
YAML
}
apply -f - <<YAML
apiVersion: muster.dev/v1alpha1
kind: Queue
metadata: {name: $ns}
spec:
  policy: {kind: conservative, depth: 4}
  cohort: research
---
$(group $ns third $ns '{min: 4}')
$(group $ns first $ns '{min: 2, max: 6}')
$(group $ns big $ns '{min: 10}')
$(group $ns fresh $ns '{min: 1}')
$(group $ns2 elsewhere other '{min: 3}')
YAML
status $ns third "  phase: Queued
  queuePosition: 3
  estimatedStart: '$in30m'
  message: needs 8 cpu more than the quota of $ns has free
  requeue: {count: 2, requeueAt: '$in5m'}
  conditions:
  - {type: Queued, status: 'True', reason: QuotaExceeded, message: waits for quota, lastTransitionTime: '$ago10m'}
  - {type: Evicted, status: 'True', reason: PodsReadyTimeout, message: not ready within 300s, lastTransitionTime: '$ago2m'}"
status $ns first "  phase: Reserved
  queuePosition: 1
  estimatedStart: '$in5m'
  conditions:
  - {type: Reserved, status: 'True', reason: Reserved, message: start reserved behind big, lastTransitionTime: '$ago2m'}"
alloc=""
for i in $(seq 0 9); do alloc+="  - {member: $i, node: node-$(( i < 9 ? i + 1 : 5 ))}"$'\n'; done
status $ns big "  phase: Running
  queuePosition: 7
  allocation:
$alloc  conditions:
  - {type: PodsReady, status: 'True', reason: PodsReady, message: all 10 members ready, lastTransitionTime: '$ago2m'}"
status $ns2 elsewhere "  phase: Queued
  queuePosition: 1"
pass "groups with controller-written statuses are in place"

# Jobs that have no group: one without the queue label, one with it (suspended: never run).
for j in plain:"" labelled:"muster.dev/queue: $ns"; do
  apply -n $ns -f - <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: ${j%%:*}
  labels: {${j#*:}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: kwok-fake}]
YAML
done

# --- muster queue ---------------------------------------------------------------------------
m queue -n $ns > "$tmp/queue.txt"
cat "$tmp/queue.txt" | sed 's/^/       /' >&2
# col NAME HEADER: the cell of row NAME under HEADER (cells are split on 2+ spaces)
col() { python3 - "$tmp/queue.txt" "$1" "$2" <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
head = re.split(r"\s{2,}", lines[0].strip())
for l in lines[1:]:
    cells = re.split(r"\s{2,}", l.strip())
    if cells[0] == sys.argv[2]:
        print(cells[head.index(sys.argv[3])])
EOF
}
check "the header is NAME QUEUE PHASE POSITION MEMBERS ESTIMATED-START REASON" \
  test "$(head -1 "$tmp/queue.txt" | tr -s ' ')" = "NAME QUEUE PHASE POSITION MEMBERS ESTIMATED-START REASON"
check "pending groups by position, then the running one" \
  test "$(tail -n +2 "$tmp/queue.txt" | awk '{print $1}' | tr '\n' ' ')" = "first third fresh big "
check "positions are shown; the running group's stale one is not" \
  test "$(col first POSITION) $(col third POSITION) $(col fresh POSITION) $(col big POSITION)" = "1 3 <none> <none>"
check "an elastic group shows its range" test "$(col first MEMBERS)" = "2..6"
check "the estimated start is relative ($(col third ESTIMATED-START))" \
  bash -c '[[ $1 =~ ^in\ (29|30)m$ ]]' _ "$(col third ESTIMATED-START)"
check "the reason is the group's message" test "$(col third REASON)" = "needs 8 cpu more than the quota of $ns has free"
check "without a message, the latest true condition says why" test "$(col first REASON)" = "start reserved behind big"
check "a group muster has not looked at shows <none>" test "$(col fresh PHASE)" = "<none>"
check "another namespace's group is not listed" bash -c "! grep -q elsewhere '$tmp/queue.txt'"

m queue -n $ns -o wide --queue $ns > "$tmp/queue.txt"
check "-o wide adds the absolute start, age and requeues" \
  test "$(col third ESTIMATED-AT) $(col third REQUEUES)" = "$in30m 2"
m queue -A -o json > "$tmp/all.json"
check "-A -o json lists both namespaces with positions" python3 - "$tmp/all.json" "$ns" "$ns2" <<'EOF'
import json, sys
items = json.load(open(sys.argv[1]))["items"]
got = {(i["namespace"], i["name"]): i for i in items}
assert got[(sys.argv[3], "elsewhere")]["position"] == 1, got
assert got[(sys.argv[2], "third")]["estimatedStart"] and got[(sys.argv[2], "third")]["requeues"] == 2, got
assert got[(sys.argv[2], "big")]["phase"] == "Running", got
EOF
m queue -A > "$tmp/queue.txt"
check "-A adds the NAMESPACE column" test "$(head -1 "$tmp/queue.txt" | awk '{print $1}')" = NAMESPACE
m queue -n $ns --queue nope > "$tmp/out.txt" 2> "$tmp/err.txt"
check "an unknown --queue warns" grep -q "queue nope does not exist" "$tmp/err.txt"

# The namespace comes from the kubeconfig's context, as with kubectl.
cp "$KUBECONFIG" "$tmp/kubeconfig"
k --kubeconfig "$tmp/kubeconfig" config set-context --current --namespace=$ns >/dev/null
check "the context's namespace is the default (--kubeconfig)" bash -c \
  "'$MUSTER_BIN' queue --kubeconfig '$tmp/kubeconfig' | grep -q '^third '"
check "the context's namespace is the default (KUBECONFIG)" bash -c \
  "KUBECONFIG='$tmp/kubeconfig' '$MUSTER_BIN' queue | grep -q '^third '"

# --- muster why -------------------------------------------------------------------------------
m why third -n $ns > "$tmp/why.txt"
sed 's/^/       /' "$tmp/why.txt" >&2
field() { sed -n "s/^$1: *//p" "$tmp/why.txt"; }
check "why: phase, position and queue policy" \
  test "$(field Phase)|$(field Position)|$(field Queue)" = "Queued|3 in queue $ns|$ns (conservative backfill, depth 4; cohort research)"
check "why: estimated start, relative and absolute" bash -c '[[ $1 =~ ^in\ (29|30)m\ \((.*)\)$ && ${BASH_REMATCH[2]} == "$2" ]]' \
  _ "$(field 'Estimated start')" "$in30m"
check "why: the message" test "$(field Message)" = "needs 8 cpu more than the quota of $ns has free"
check "why: requeue count and time" bash -c '[[ $1 == "2, back in the queue in "*"($2)" ]]' _ "$(field Requeues)" "$in5m"
check "why: every condition with reason, age and message" bash -c \
  "grep -Eq '^  Queued +True +QuotaExceeded +(9m|10m)[0-9s]* +waits for quota$' '$tmp/why.txt' &&
   grep -Eq '^  Evicted +True +PodsReadyTimeout +(1[0-9]{2}s|2m[0-9]*s?) +not ready within 300s$' '$tmp/why.txt'"
check "why: no allocation yet" test "$(field Allocation)" = "<none>"
m why big -n $ns > "$tmp/why.txt"
check "why: a big allocation collapses into a node range" bash -c \
  "grep -q '^Allocation: *10 members on 9 nodes' '$tmp/why.txt' && grep -q '^  node-1..node-9 (10 members)$' '$tmp/why.txt'"
check "why: a running group has no position" bash -c "! grep -q '^Position:' '$tmp/why.txt'"

set +e
m why plain -n $ns > "$tmp/out.txt" 2>&1; rc_plain=$?
m why labelled -n $ns > "$tmp/out2.txt" 2>&1; rc_labelled=$?
m why no-such-job -n $ns > "$tmp/out3.txt" 2>&1; rc_none=$?
m queue --kubeconfig "$tmp/missing-kubeconfig" > "$tmp/out4.txt" 2>&1; rc_bad=$?
set -e
check "why: a Job without the queue label is not managed (exit 1)" bash -c \
  "[[ $rc_plain == 1 ]] && grep -qx 'job plain is not managed by muster: it has no muster.dev/queue label' '$tmp/out.txt'"
check "why: a labelled Job without a group points at the controller (exit 1)" bash -c \
  "[[ $rc_labelled == 1 ]] && grep -q 'job labelled asks for queue $ns but muster has not made a group' '$tmp/out2.txt'"
check "why: no such job (exit 1)" bash -c "[[ $rc_none == 1 ]] && grep -q 'no such job: no-such-job' '$tmp/out3.txt'"
check "a missing kubeconfig is an error, not a panic (exit 2)" bash -c \
  "[[ $rc_bad == 2 ]] && grep -q '^error: cannot read kubeconfig' '$tmp/out4.txt' && ! grep -q panicked '$tmp/out4.txt'"

# --- as a kubectl plugin ----------------------------------------------------------------------
mkdir -p "$tmp/bin"
ln -s "$MUSTER_BIN" "$tmp/bin/kubectl-muster"
check "kubectl muster queue prints the same table" bash -c \
  "diff <(PATH='$tmp/bin':\$PATH '$K8S_BIN/kubectl' muster queue -n $ns | awk '{print \$1, \$2, \$3, \$4}') \
        <('$MUSTER_BIN' queue -n $ns | awk '{print \$1, \$2, \$3, \$4}')"
check "kubectl muster why works" bash -c \
  "PATH='$tmp/bin':\$PATH '$K8S_BIN/kubectl' muster why third -n $ns | grep -q '^Position: *3 in queue'"
check "its usage names it kubectl muster" bash -c \
  "PATH='$tmp/bin':\$PATH '$K8S_BIN/kubectl' muster --help | grep -q 'Usage: kubectl muster'"

k delete namespace $ns $ns2 --wait=false >/dev/null
k delete queues.muster.dev $ns --ignore-not-found >/dev/null
