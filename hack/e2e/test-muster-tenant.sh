#!/usr/bin/env bash
# e2e: six defects muster had, replayed by a hostile tenant (kubectl --as=tenant, the `edit`
# ClusterRole in namespaces labelled muster.dev/managed=true), each checked for the fixed
# behaviour, on 4 KWOK nodes of 8 cpu (scenarios/clusters/tenant-4x8.yaml, node-0..node-3).
# For the whole test hack/e2e/overcommit.py checks every 0.5 s that no node has more requested
# by its bound pods than it has allocatable (counted as the kubelet counts, apart from muster's
# code); any violation it saw fails the test at the end.
#
#   1  a foreign pod on a node muster holds: the tenant's Job holds 6 cpu of node-2 (admitted,
#      its pods can never be created), an admin binds a 7-cpu pod to node-2 directly, an honest
#      4 x 1.5 cpu Job pinned to node-2 waits, the tenant deletes its Job: the honest Job must not
#      be bound beside the foreign pod, and runs once that pod is gone
#   2  a plain-pod group sized from its first pod: pod 0 asks 10m, pods 1-3 ask 7 cpu: refused by
#      the webhook (message about resources) or an InvalidGroup event; no pod of it ever bound
#   3  native sidecars (4 cpu sidecar + 1 cpu container = 5 per member, the two members on two
#      nodes) and pod-level resources (spec.resources 5 cpu, if the apiserver takes the field)
#   4  a pod with only the queue label is refused naming muster.dev/group; a pod with the queue
#      label and spec.nodeName is refused without being told to add the label it has; a plain
#      pod labelled with a Job's group is refused, saying it is a workload's (not whose)
#   5  Groups: with RBAC rights on them, the tenant can neither mark its running Group Succeeded
#      nor delete it; a status forged as muster is restored, a Group deleted as muster comes back
#   6  room held for pods that never come: parallelism 4 / completions 2 is a group of min 2; a
#      plain group of 50 with 5 pods is not admitted (its status says so) and an honest Job runs;
#      a pod for muster's scheduler without group labels gets a MissingGroup warning event
#   7  amounts in the forms the apiserver keeps (canonical quantities with an exponent or the micro
#      suffix: 20e9, 4000001u): 2 x 20e9 bytes of memory pinned to one node of 32Gi, and 2 x
#      4000001u cpu pinned to one node of 8 cpu, are never both bound there, and their Groups count
#      them; 2 x 20e9 bytes in a queue of 30Gi are refused by the webhook (the quota holds)
#
# Each replay runs in its own namespace; each part of it in a subshell, so a failure is named
# (`FAIL replay 2b`) with what the namespace held, and the other replays still run.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-muster-tenant" >&2
pfx=e2e-tenant
foreign_ns=$pfx-foreign
tmp=$(mktemp -d)
checker_pid=""
failed=()
ns=""
dump_ns=()

stop_checker() {
  if [[ -n $checker_pid ]] && kill -0 "$checker_pid" 2>/dev/null; then
    kill -TERM "$checker_pid"; wait "$checker_pid" 2>/dev/null || true
  fi
  checker_pid=""
}
cleanup() {
  stop_checker
  k delete namespace $pfx-1 $pfx-2 $pfx-3 $pfx-4 $pfx-5 $pfx-6 $pfx-7 $foreign_ns \
    --ignore-not-found --wait=false >/dev/null 2>&1 || true
  muster_down
  k delete clusterrole $pfx-groups --ignore-not-found >/dev/null 2>&1 || true
  k delete queues.muster.dev $pfx-mem --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kt() { k --as=tenant --as-group=system:authenticated "$@"; }               # the hostile tenant
km() { k --kubeconfig "$muster_dir/controller.kubeconfig" "$@"; }          # muster's own identity
# mstatus NS GROUP PATCH: a merge patch of the Group's status with muster's own token, as muster
# sends it (kubectl patch would first read groups/status, which muster's RBAC does not grant);
# prints the Group the apiserver returns
mstatus() {
  km config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$tmp/api-ca.crt"
  curl -sS --fail-with-body --cacert "$tmp/api-ca.crt" -X PATCH \
    -H "Authorization: Bearer $(km config view --raw -o jsonpath='{.users[0].user.token}')" \
    -H 'Content-Type: application/merge-patch+json' --data "$3" \
    "$(km config view --raw -o jsonpath='{.clusters[0].cluster.server}')/apis/muster.dev/v1alpha1/namespaces/$1/groups/$2/status"
}
m() { "$MUSTER_BIN" "$@"; }

# tjob NAME PODS CPU [key=value...]: a Job in queue default
#   completions=N  node=NODE (nodeSelector on the hostname)  run=SECONDS (KWOK run time; none: forever)
#   sa=NAME (serviceAccountName)  sidecar=CPU (a native sidecar)  podcpu=CPU (pod-level requests)
#   queue=0 (no queue label)  queue=NAME (that queue)  mem=QUANTITY (memory per pod; 10Mi)
tjob() {
  local name=$1 pods=$2 cpu=$3; shift 3
  local completions=$pods node="" run="" sa="" sidecar="" podcpu="" queue=1 mem=10Mi kv
  for kv in "$@"; do local "${kv%%=*}"="${kv#*=}"; done
  local ann="" extra="" labels="{}"
  [[ -n $run ]] && ann="kwok.muster.dev/run-seconds: \"$run\", "
  case $queue in 0) ;; 1) labels="{muster.dev/queue: default}" ;; *) labels="{muster.dev/queue: $queue}" ;; esac
  [[ -n $node ]] && extra+="      nodeSelector: {kubernetes.io/hostname: $node}"$'\n'
  [[ -n $sa ]] && extra+="      serviceAccountName: $sa"$'\n'
  [[ -n $podcpu ]] && extra+="      resources: {requests: {cpu: \"$podcpu\"}}"$'\n'
  [[ -n $sidecar ]] && extra+=$(printf '      %s\n' "initContainers:" "- name: sidecar" "  image: kwok-fake" \
    "  restartPolicy: Always" "  resources: {requests: {cpu: \"$sidecar\", memory: 10Mi}}")$'\n'
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
  labels: $labels
spec:
  parallelism: $pods
  completions: $completions
  backoffLimit: 0
  template:
    metadata:
      annotations: {${ann}e2e.muster.dev/test: "true"}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
${extra}      containers:
      - name: main
        image: kwok-fake
        resources:
          requests: {cpu: "$cpu", memory: "$mem"}
YAML
}

# tpod NAME CPU LABELS [key=value...]: a bare pod (LABELS: the inside of a YAML flow map)
#   node=NODE (spec.nodeName)  scheduler=NAME  run=SECONDS
tpod() {
  local name=$1 cpu=$2 labels=$3; shift 3
  local node="" scheduler="" run="" kv
  for kv in "$@"; do local "${kv%%=*}"="${kv#*=}"; done
  local ann="" extra=""
  [[ -n $run ]] && ann="kwok.muster.dev/run-seconds: \"$run\", "
  [[ -n $node ]] && extra+="  nodeName: $node"$'\n'
  [[ -n $scheduler ]] && extra+="  schedulerName: $scheduler"$'\n'
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $name
  labels: {$labels}
  annotations: {${ann}e2e.muster.dev/test: "true"}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
${extra}  containers:
  - name: main
    image: kwok-fake
    resources:
      requests: {cpu: "$cpu", memory: 10Mi}
YAML
}

# --- reading the cluster ----------------------------------------------------------------------
nodes_of() { # nodes_of NS SELECTOR: the nodes of its bound pods, one a line
  k -n "$1" get pods -l "$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sed '/^$/d'
}
n_bound() { nodes_of "$1" "$2" | wc -l; }
n_pods() { k -n "$1" get pods -l "$2" -o name | wc -l; }
none_bound() { [[ $(n_bound "$1" "$2") -eq 0 ]]; }
all_bound_on() { # all_bound_on NS SELECTOR N [NODE]: N pods bound (all on NODE)
  local nodes; nodes=$(nodes_of "$1" "$2")
  [[ $(grep -c . <<<"$nodes") -eq $3 ]] || return 1
  [[ -z ${4:-} || $(sort -u <<<"$nodes") == "$4" ]]
}
pod_running() { [[ $(k -n "$1" get pod "$2" -o jsonpath='{.status.phase}' 2>/dev/null) == Running ]]; }
gget() { k -n "$1" get groups.muster.dev "$2" -o jsonpath="$3" 2>/dev/null; }
group_exists() { k -n "$1" get groups.muster.dev "$2" >/dev/null 2>&1; }
placed() { [[ $(group_phase "$1" "$2") =~ ^(Admitted|Running)$ ]]; }
admitted_on() { # admitted_on NS GROUP NODE: admitted, every member on NODE
  placed "$1" "$2" || return 1
  local nodes; nodes=$(gget "$1" "$2" '{range .status.allocation[*]}{.node}{"\n"}{end}' | sed '/^$/d' | sort -u)
  [[ $nodes == "$3" ]]
}
group_cpu() { # group_cpu NS GROUP CPU: the Group asks CPU cores per member ("5" or "5000m")
  local v; v=$(gget "$1" "$2" '{.spec.resources.cpu}')
  [[ $v == "$3" || $v == "$(( $3 * 1000 ))m" || $v == "$3.0" ]]
}
phase_is() { [[ $(group_phase "$1" "$2") =~ ^($3)$ ]]; } # phase_is NS GROUP REGEX
has_warning() { # has_warning NS REASON [OBJECT]: a Warning event with REASON (on OBJECT)
  local sel="reason=$2"
  [[ -n ${3:-} ]] && sel+=",involvedObject.name=$3"
  [[ $(k -n "$1" get events --field-selector "$sel" -o jsonpath='{.items[*].type}') == *Warning* ]]
}

# throughout SECONDS DESCRIPTION CMD...: CMD holds at every poll (each second) for SECONDS
throughout() {
  local secs=$1 what=$2; shift 2
  local t0; t0=$(date +%s)
  while (( $(date +%s) - t0 < secs )); do
    "$@" || fail "$what (broken after $(( $(date +%s) - t0 ))s)"
    sleep 1
  done
  pass "$what (${secs}s)"
}

# refused_by DESCRIPTION OUTFILE CMD...: CMD fails (its output in OUTFILE); stdin goes to CMD
refused_by() {
  local what=$1 out=$2; shift 2
  if "$@" >"$out" 2>&1; then fail "$what: accepted: $(tr '\n' ' ' <"$out")"; fi
  pass "$what: refused: $(tr '\n' ' ' <"$out" | cut -c1-400)"
}

# --- namespaces, parts, what a failure shows ------------------------------------------------
managed_ns() { # managed_ns NS: a fresh namespace muster manages, where the tenant has edit rights
  fresh_namespace "$1"
  k label namespace "$1" muster.dev/managed=true >/dev/null
  k -n "$1" create rolebinding tenant-edit --clusterrole=edit --user=tenant >/dev/null
}
release() { # release NS...: delete them, and wait (at most 60 s) until their pods hold nothing
  k delete namespace "$@" --ignore-not-found --wait=false >/dev/null
  local n deadline=$(( $(date +%s) + 60 ))
  for n in "$@"; do
    until [[ -z $(k -n "$n" get pods -o name 2>/dev/null) ]]; do
      (( $(date +%s) < deadline )) || { log "pods of namespace $n still there after 60 s"; return 0; }
      sleep 0.5
    done
  done
}
dump() { # dump NS...: pods, Groups and events, after a failure
  local n
  for n in "$@"; do
    echo "       --- namespace $n: pods, Groups, events (last 15)" >&2
    {
      k -n "$n" get pods --no-headers -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase,GATES:.spec.schedulingGates[*].name,SCHEDULER:.spec.schedulerName' 2>&1
      k -n "$n" get groups.muster.dev --no-headers -o custom-columns='GROUP:.metadata.name,PHASE:.status.phase,MIN:.spec.members.min,CPU:.spec.resources.cpu,NODES:.status.allocation[*].node,MESSAGE:.status.message' 2>&1
      k -n "$n" get events --sort-by=.metadata.creationTimestamp --no-headers \
        -o custom-columns='TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message' 2>&1 | tail -n 15
    } | cut -c1-300 | sed 's/^/       /' >&2
  done
}
# part ID TITLE FN: one check of a replay, in a subshell; a failure is recorded, the test goes on
part() {
  local id=$1 title=$2 rc; shift 2
  printf -- '-- replay %s: %s\n' "$id" "$title" >&2
  set +e
  ( set -e; "$@" )
  rc=$?
  set -e
  if (( rc != 0 )); then
    printf '  FAIL replay %s (%s)\n' "$id" "$title" >&2
    failed+=("$id ($title)")
    (( ${#dump_ns[@]} )) && dump "${dump_ns[@]}"
  fi
  return 0
}

# === 1: a foreign pod on a node muster holds ====================================================
honest_waits() { ! placed "$ns" honest && none_bound "$ns" batch.kubernetes.io/job-name=honest; }
r1() {
  # The tenant's Job names a service account that does not exist, so the Job controller can never
  # create its pods: muster admits it and holds 6 cpu of node-2 for pods that never run there.
  # (Running pods would do as well for muster, but on KWOK, which has no kubelet admission, the
  # admin's 7-cpu pod would then itself over-commit node-2.)
  tjob hold 4 1500m node=node-2 sa=e2e-no-such-account run=600 | kt -n "$ns" create -f - >/dev/null
  eventually 30 "muster admits the tenant's Job hold (4 x 1.5 cpu) on node-2" admitted_on "$ns" hold node-2
  check "hold has no pod (its service account does not exist): the room on node-2 is held, not used" \
    test "$(n_pods "$ns" batch.kubernetes.io/job-name=hold)" -eq 0
  tpod foreign 7 'app: foreign' node=node-2 | k -n "$foreign_ns" create -f - >/dev/null
  eventually 15 "an admin's 7-cpu pod, spec.nodeName node-2 in an unmanaged namespace, runs" pod_running "$foreign_ns" foreign
  tjob honest 4 1500m node=node-2 run=5 | k -n "$ns" create -f - >/dev/null
  eventually 15 "the honest Job (4 x 1.5 cpu, pinned to node-2) has a Group" group_exists "$ns" honest
  sleep 2
  check "and waits (phase $(group_phase "$ns" honest), $(n_bound "$ns" batch.kubernetes.io/job-name=honest) pods bound)" \
    honest_waits
  kt -n "$ns" delete job hold --wait=false >/dev/null
  pass "the tenant deleted its Job hold"
  throughout 10 "the honest Job is not bound to node-2 beside the foreign pod (7 + 6 > 8 cpu)" \
    none_bound "$ns" batch.kubernetes.io/job-name=honest
  k -n "$foreign_ns" delete pod foreign --wait=false >/dev/null
  eventually 30 "with the foreign pod gone, the honest Job's 4 pods are bound to node-2" \
    all_bound_on "$ns" batch.kubernetes.io/job-name=honest 4 node-2
}

# === 2: a plain-pod group sized from its first pod ===============================================
g2_unplaced() { none_bound "$ns" muster.dev/group=g2 && ! placed "$ns" g2; }
r2() {
  local labels='muster.dev/queue: default, muster.dev/group: g2, muster.dev/group-size: "4"' i accepted=0
  tpod g2-0 10m "$labels" run=600 | kt -n "$ns" create -f - >/dev/null
  pass "pod g2-0 of group g2 (size 4) asks 10m cpu"
  sleep 2 # g2-0 is the pod muster sees first
  for i in 1 2 3; do
    if tpod "g2-$i" 7 "$labels" run=600 | kt -n "$ns" create -f - >"$tmp/out" 2>&1; then
      accepted=$(( accepted + 1 ))
      echo "  ..   pod g2-$i (7 cpu) accepted by the webhook" >&2
    else
      grep -qi resource "$tmp/out" || fail "pod g2-$i (7 cpu) refused, but the message does not mention resources: $(cat "$tmp/out")"
      pass "pod g2-$i (7 cpu) refused: $(cut -c1-300 "$tmp/out")"
    fi
  done
  throughout 10 "no pod of g2 is bound and its Group is not admitted" g2_unplaced
  if (( accepted )); then
    eventually 10 "$accepted pod(s) asking more than g2-0 got in: a Warning event InvalidGroup (on Group g2)" \
      has_warning "$ns" InvalidGroup
  fi
}

# === 3: native sidecars and pod-level resources ==================================================
r3a() {
  tjob sidecar 2 1 sidecar=4 run=600 | kt -n "$ns" create -f - >/dev/null
  eventually 20 "the Group of a Job with a 4-cpu native sidecar and a 1-cpu container asks 5 cpu per member" \
    group_cpu "$ns" sidecar 5
  eventually 30 "both pods are bound" all_bound_on "$ns" batch.kubernetes.io/job-name=sidecar 2
  check "on two nodes (5 + 5 > 8 cpu): $(nodes_of "$ns" batch.kubernetes.io/job-name=sidecar | tr '\n' ' ')" \
    test "$(nodes_of "$ns" batch.kubernetes.io/job-name=sidecar | sort -u | wc -l)" -eq 2
}
r3b() {
  local out
  # The apiserver alone decides (no queue label: no muster webhook): it refuses the field, or
  # drops it when the PodLevelResources feature is off.
  if ! out=$(tjob probe 1 1 podcpu=5 queue=0 | k -n "$ns" create --dry-run=server -f - \
      -o jsonpath='{.spec.template.spec.resources.requests.cpu}' 2>&1); then
    pass "SKIPPED: the apiserver refuses pod-level resources: $out"; return 0
  fi
  if [[ -z $out ]]; then
    pass "SKIPPED: the apiserver drops pod-level resources (feature PodLevelResources off)"; return 0
  fi
  tjob podlevel 2 1 podcpu=5 run=600 | kt -n "$ns" create -f - >/dev/null
  eventually 20 "the Group of a Job whose pods ask 5 cpu at pod level (1-cpu container) asks 5 cpu per member" \
    group_cpu "$ns" podlevel 5
  eventually 30 "both pods are bound" all_bound_on "$ns" batch.kubernetes.io/job-name=podlevel 2
}

# === 4: refusals that name the right fix =========================================================
r4a() {
  refused_by "a pod with muster.dev/queue and no muster.dev/group" "$tmp/out" \
    kt -n "$ns" create -f - <<<"$(tpod queue-only 10m 'muster.dev/queue: default')"
  check "the message names muster.dev/group" grep -qF muster.dev/group "$tmp/out"
}
no_queue_advice() { ! grep -Eiq '(give|add)[^.;]*(muster\.dev/queue label|label muster\.dev/queue)' "$1"; }
r4b() {
  refused_by "a pod with muster.dev/queue and spec.nodeName" "$tmp/out" \
    kt -n "$ns" create -f - <<<"$(tpod pinned 10m 'muster.dev/queue: default' node=node-1)"
  check "the message does not tell it to add the muster.dev/queue label it has" no_queue_advice "$tmp/out"
}
# A Job's group is its own: a plain pod naming it would run on a member placed for the Job.
r4c() {
  kt -n "$ns" create -f - <<<"$(tjob owned 2 10m)" >/dev/null
  eventually 15 "Job owned's Group exists" group_exists "$ns" owned
  refused_by "a plain pod labelled muster.dev/group=owned (Job owned's group)" "$tmp/out" \
    kt -n "$ns" create -f - <<<"$(tpod owned-stray 10m 'muster.dev/queue: default, muster.dev/group: owned')"
  check "the message says the group is a workload's, and not whose (a review can be forged)" \
    bash -c "grep -qF \"group owned is a workload's group\" '$tmp/out' && ! grep -qF 'Job owned' '$tmp/out'"
}

# === 5: Groups are muster's ======================================================================
r5_running() { eventually 30 "the Group of the tenant's running Job run5 is Running" phase_is "$ns" run5 Running; }
not_deleting() { group_exists "$1" "$2" && [[ -z $(gget "$1" "$2" '{.metadata.deletionTimestamp}') ]]; }
renewed() { # renewed NS GROUP OLD-UID: a Group of another uid, not being deleted
  not_deleting "$1" "$2" && [[ $(gget "$1" "$2" '{.metadata.uid}') != "$3" ]]
}
job_exists() { k -n "$1" get job "$2" >/dev/null 2>&1; }
r5a() {
  tjob run5 2 500m | kt -n "$ns" create -f - >/dev/null
  r5_running
  refused_by "the tenant patching its Group's status to Succeeded" "$tmp/out" \
    kt -n "$ns" patch groups.muster.dev run5 --subresource=status --type=merge -p '{"status": {"phase": "Succeeded"}}'
  check "the Group is still Running ($(group_phase "$ns" run5))" test "$(group_phase "$ns" run5)" = Running
}
r5b() {
  group_exists "$ns" run5 || fail "no Group run5 to delete"
  refused_by "the tenant deleting its Group" "$tmp/out" kt -n "$ns" delete groups.muster.dev run5 --wait=false
  check "the Group is still there, not being deleted" not_deleting "$ns" run5
}
forged() { [[ $1 == Succeeded/ || $1 == "Succeeded/[]" ]]; }
r5c() {
  r5_running
  local out
  out=$(mstatus "$ns" run5 '{"status": {"phase": "Succeeded", "allocation": []}}' |
    python3 -c 'import json, sys; s = json.load(sys.stdin)["status"]; print(s.get("phase"), json.dumps(s.get("allocation", [])), sep="/")')
  check "muster's identity forged the status (phase/allocation now $out)" forged "$out"
  eventually 10 "the controller restores the phase (Running or Admitted)" phase_is "$ns" run5 'Running|Admitted'
  echo "  ..   Group run5: $(gget "$ns" run5 '{.status.phase}, allocation {.status.allocation[*].node}')" >&2
}
lists_job() { cut -d' ' -f1 "$1" | grep -qx "$2"; } # lists_job FILE JOB: a row of `muster queue` names JOB
r5d() {
  local uid
  uid=$(gget "$ns" run5 '{.metadata.uid}') || fail "no Group run5 to delete"
  km -n "$ns" delete groups.muster.dev run5 --wait=false >/dev/null
  pass "muster's identity deleted Group run5"
  eventually 10 "the Group is back (a new object, not being deleted)" renewed "$ns" run5 "$uid"
  eventually 10 "with muster's status (Running)" phase_is "$ns" run5 Running
  check "the Job still exists" job_exists "$ns" run5
  m queue -n "$ns" >"$tmp/queue" 2>&1 || true
  sed 's/^/       /' "$tmp/queue" >&2
  check "muster queue lists the Job" lists_job "$tmp/queue" run5
}

# === 6: room held for pods that never come =======================================================
g50_unplaced() { none_bound "$ns" muster.dev/group=g50 && ! placed "$ns" g50; }
g50_says() { [[ $(gget "$ns" g50 '{.status.message} {.status.conditions[*].message}') == *"$1"* ]]; }
min_is() { [[ $(gget "$1" "$2" '{.spec.members.min}') == "$3" ]]; }
r6a() {
  tjob half 4 10m completions=2 run=3 | kt -n "$ns" create -f - >/dev/null
  eventually 15 "a Job of parallelism 4 and completions 2 is a Group of min 2 (it never has more than 2 pods)" min_is "$ns" half 2
}
r6b() {
  local i labels='muster.dev/queue: default, muster.dev/group: g50, muster.dev/group-size: "50"'
  for i in 0 1 2 3 4; do tpod "g50-$i" 600m "$labels" run=600 | kt -n "$ns" create -f - >/dev/null; done
  pass "5 pods of a plain group of size 50 x 600m cpu (30 of the cluster's 32 cpu)"
  tjob honest 4 2 run=600 | k -n "$ns" create -f - >/dev/null
  pass "an honest Job of 4 x 2 cpu, which needs room the group would hold"
  throughout 10 "no pod of g50 is bound and its Group is not admitted" g50_unplaced
  eventually 10 "the Group's status says how many pods exist (\"5 of\")" g50_says "5 of"
  echo "  ..   Group g50: $(gget "$ns" g50 '{.status.phase}: {.status.message}')" >&2
  eventually 30 "the honest Job runs (4 pods bound)" all_bound_on "$ns" batch.kubernetes.io/job-name=honest 4
}
r6c() {
  local pod=stray
  if tpod $pod 10m 'app: stray' scheduler=muster | kt -n "$ns" create -f - >"$tmp/out" 2>&1; then
    pass "the tenant created pod $pod for muster's scheduler without muster labels"
  else
    pass "the webhook refuses the tenant's pod for muster's scheduler without muster labels: $(cut -c1-300 "$tmp/out")"
    if ! tpod $pod 10m 'app: stray' scheduler=muster | k -n "$ns" create -f - >"$tmp/out" 2>&1; then
      pass "and refuses the admin's too, so no such pod can wait unseen: $(cut -c1-300 "$tmp/out")"
      return 0
    fi
    pass "the admin created it"
  fi
  eventually 10 "a Warning event MissingGroup on pod $pod" has_warning "$ns" MissingGroup $pod
}

# A Job without the queue label whose template names muster's scheduler: nobody places its pod.
r6d() {
  tjob unqueued 1 10m queue=0 | sed 's/^    spec:$/    spec:\n      schedulerName: muster/' | kt -n "$ns" create -f - >/dev/null
  pass "the tenant created Job unqueued (no queue label) whose pods name muster's scheduler"
  local pod=""
  for _ in $(seq 1 20); do
    pod=$(k -n "$ns" get pods -l batch.kubernetes.io/job-name=unqueued -o jsonpath='{.items[0].metadata.name}' 2>/dev/null) || true
    [[ -n $pod ]] && break
    sleep 0.5
  done
  [[ -n $pod ]] || fail "the Job controller made no pod for Job unqueued"
  eventually 10 "a Warning event MissingGroup on its pod $pod" has_warning "$ns" MissingGroup "$pod"
}

# === 7: quantities in the forms the apiserver keeps ==============================================
group_asks() { [[ $(gget "$1" "$2" "{.spec.resources.$3}") == "$4" ]]; } # group_asks NS GROUP RESOURCE AMOUNT
not_both_on() { [[ $(nodes_of "$1" "$2" | grep -cx "$3") -lt 2 ]]; }
# r7_pinned JOB CPU MEM FIELD VALUE: a Job of 2 pods pinned to node-1, too big for it together
r7_pinned() {
  local job=$1 cpu=$2 mem=$3 field=$4 value=$5
  if ! tjob "$job" 2 "$cpu" node=node-1 mem="$mem" run=600 | kt -n "$ns" create -f - >"$tmp/out" 2>&1; then
    pass "Job $job (2 x cpu $cpu, memory $mem on node-1) refused: $(cut -c1-300 "$tmp/out")"
    return 0
  fi
  eventually 15 "Job $job (2 x cpu $cpu, memory $mem, pinned to node-1) has a Group" group_exists "$ns" "$job"
  eventually 10 "its Group counts $field $value per member" group_asks "$ns" "$job" "$field" "$value"
  throughout 10 "its two pods are never both bound to node-1" not_both_on "$ns" "batch.kubernetes.io/job-name=$job" node-1
}
r7a() { r7_pinned exp 10m 20e9 memory 20000000000; }
r7b() { r7_pinned micro 4000001u 10Mi cpu 4001m; }
r7c() {
  k apply --server-side --field-manager=muster-e2e -f - >/dev/null <<YAML
apiVersion: muster.dev/v1alpha1
kind: Queue
metadata: {name: $pfx-mem}
spec:
  quotas: {memory: {nominal: 30Gi}}
  namespaceSelector: {namespaces: [$ns]}
YAML
  refused_by "a Job of 2 x 20e9 bytes in queue $pfx-mem (memory quota 30Gi)" "$tmp/out" \
    kt -n "$ns" create -f - <<<"$(tjob overquota 2 10m queue=$pfx-mem mem=20e9)"
  check "the message names the queue's memory limit" grep -qF "memory 30Gi" "$tmp/out"
}

# === the test ====================================================================================
muster_up
# Rights on Groups an admin might give a tenant (bound in replay 5), so that muster is what refuses.
k apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: $pfx-groups}
rules:
- apiGroups: [muster.dev]
  resources: [groups, groups/status]
  verbs: [get, list, watch, patch, update, delete]
YAML
python3 "$hack_dir/e2e/overcommit.py" --kubeconfig "$KUBECONFIG" --kubectl "$K8S_BIN/kubectl" --interval 0.5 \
  --log "$tmp/overcommit.log" --state "$tmp/overcommit.json" &
checker_pid=$!
checker_polled() { [[ -s $tmp/overcommit.json ]] && ! grep -q '"polls": 0,' "$tmp/overcommit.json"; }
eventually 15 "the over-commit checker polls the cluster every 0.5 s (pid $checker_pid)" checker_polled

ns=$pfx-1; dump_ns=("$ns" "$foreign_ns")
managed_ns "$ns"; fresh_namespace "$foreign_ns"
part 1 "a foreign pod on a node muster holds" r1
release "$ns" "$foreign_ns"

ns=$pfx-2; dump_ns=("$ns")
managed_ns "$ns"
part 2 "a plain-pod group sized from its first pod" r2
release "$ns"

ns=$pfx-3; dump_ns=("$ns")
managed_ns "$ns"
part 3a "native sidecars count beside the containers" r3a
part 3b "pod-level resources replace the containers' sum" r3b
release "$ns"

ns=$pfx-4; dump_ns=("$ns")
managed_ns "$ns"
part 4a "a pod with a queue but no group is refused, naming muster.dev/group" r4a
part 4b "a refusal does not ask for the queue label the pod has" r4b
part 4c "a plain pod cannot join a Job's group" r4c
release "$ns"

ns=$pfx-5; dump_ns=("$ns")
managed_ns "$ns"
k -n "$ns" create rolebinding tenant-groups --clusterrole=$pfx-groups --user=tenant >/dev/null
part 5a "the tenant cannot mark its running Group Succeeded" r5a
part 5b "the tenant cannot delete its Group" r5b
part 5c "muster restores a forged Group status" r5c
part 5d "muster recreates a deleted Group" r5d
# No replay of an in-place resize (pods/resize): kube-apiserver (1.35 and 1.37) refuses it on KWOK nodes
# before admission ("Pod running on node without support for resize"); the webhook's rule is
# tested in crates/muster-webhook/tests/tenant.rs.
release "$ns"

ns=$pfx-6; dump_ns=("$ns")
managed_ns "$ns"
part 6a "a Job holds room for the pods it can have at once" r6a
part 6b "a plain group is not admitted before its pods exist" r6b
part 6c "a pod for muster without group labels is reported" r6c
part 6d "a pod of a Job without the queue label, for muster, is reported" r6d
release "$ns"

ns=$pfx-7; dump_ns=("$ns")
managed_ns "$ns"
part 7a "memory of 20e9 bytes counts" r7a
part 7b "cpu of 4000001u counts" r7b
part 7c "a queue's memory quota holds for 20e9 bytes" r7c
k delete queues.muster.dev $pfx-mem --ignore-not-found >/dev/null 2>&1 || true
release "$ns"

# --- the over-commit checker's verdict ---------------------------------------------------------
alive=0; kill -0 "$checker_pid" 2>/dev/null && alive=1
stop_checker
state=$(cat "$tmp/overcommit.json" 2>/dev/null || echo '{}')
echo "-- over-commit checker: $state" >&2
read -r n_polls n_errors n_violations < <(python3 -c '
import json, sys
s = json.loads(sys.argv[1] or "{}")
print(s.get("polls", 0), s.get("errors", 0), s.get("violations", 0))' "$state")
if (( ! alive )); then
  failed+=("over-commit checker (it died during the test)")
elif (( n_polls < 50 || n_errors * 10 > n_polls )); then
  failed+=("over-commit checker (only $n_polls polls, $n_errors errors: it did not watch the test)")
elif (( n_violations > 0 )); then
  sed 's/^/       /' "$tmp/overcommit.log" >&2
  failed+=("over-commit checker ($n_violations violations: nodes with more requested than allocatable, above)")
else
  pass "no node was over-committed in $n_polls polls (every 0.5 s, $n_errors errors)"
fi

if (( ${#failed[@]} )); then
  printf '  FAIL muster-tenant: %s\n' "${failed[@]}" >&2
  exit 1
fi
pass "muster-tenant: all seven replays hold"
