# Helpers for the harness e2e tests (sourced). Expects KUBECONFIG to point at the cluster.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

k() { "$K8S_BIN/kubectl" "$@"; }

pass() { printf '  ok   %s\n' "$*" >&2; }
fail() { printf '  FAIL %s\n' "$*" >&2; exit 1; }
# check DESCRIPTION CONDITION...: run CONDITION (a command); fail with DESCRIPTION if false.
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

# eventually SECONDS DESCRIPTION CMD...: poll CMD every second until it succeeds.
eventually() {
  local secs=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@"; do
    (( $(date +%s) < deadline )) || fail "$what (not within ${secs}s)"
    sleep 1
  done
  pass "$what"
}

# refused DESCRIPTION MESSAGE CMD...: CMD fails and says MESSAGE (stdin goes to CMD)
refused() {
  local what=$1 msg=$2 out; shift 2
  if out=$("$@" 2>&1); then fail "$what: accepted"; fi
  grep -qF -- "$msg" <<<"$out" || fail "$what: refused, but without \"$msg\": $out"
  pass "$what: refused with \"$msg\""
}

# fresh_namespace NAME: delete NAME if present, create it
fresh_namespace() {
  k delete namespace "$1" --ignore-not-found --wait=true --timeout=120s >/dev/null
  k create namespace "$1" >/dev/null
  # Pods need the namespace's default service account (created by the controller-manager).
  local i
  for i in $(seq 1 60); do k -n "$1" get serviceaccount default >/dev/null 2>&1 && return 0; sleep 0.5; done
  fail "namespace $1 has no default service account"
}

# job_yaml NAME PODS [key=value...]: a batch/v1 Job of PODS pods for KWOK.
#   memory=316Mi cpu=100m run=SECONDS after=start|all-ready indexed=1 completions=N
job_yaml() {
  local name=$1 pods=$2; shift 2
  local memory=1Mi cpu=10m run="" after="" indexed="" completions=$pods kv
  for kv in "$@"; do local "${kv%%=*}"="${kv#*=}"; done
  local mode="" ann=""
  [[ -n $indexed ]] && mode="  completionMode: Indexed"
  [[ -n $run ]] && ann+="        kwok.muster.dev/run-seconds: '$run'"$'\n'
  [[ -n $after ]] && ann+="        kwok.muster.dev/run-after: '$after'"$'\n'
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
spec:
  parallelism: $pods
  completions: $completions
  backoffLimit: 0
$mode
  template:
    metadata:
      annotations:
${ann}        e2e.muster.dev/test: "true"
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers:
      - name: main
        image: kwok-fake
        resources:
          requests: {cpu: "$cpu", memory: "$memory"}
YAML
}

pods_in_phase() { # pods_in_phase NS SELECTOR PHASE
  k -n "$1" get pods -l "$2" --field-selector "status.phase=$3" -o name | wc -l
}
# jobs_span NS: seconds from the first Job's creation to the last Job's completion, from the
# Jobs' own timestamps (1 s resolution): a wall time that no poll loop skews, the same for muster
# and its peers.
jobs_span() {
  k -n "$1" get jobs -o json | python3 -c '
import json, sys
from datetime import datetime
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()
jobs = json.load(sys.stdin)["items"]
print(int(max(t(j["status"]["completionTime"]) for j in jobs) - min(t(j["metadata"]["creationTimestamp"]) for j in jobs)))'
}
job_complete() { # job_complete NS JOB
  [[ $(k -n "$1" get job "$2" -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}') == True ]]
}

# --- peers: seed 001 under another scheduler (test-peer-*.sh) --------------------------------

# peer_test PEER [TEARDOWN]: the start of test-peer-PEER.sh: ns=e2e-peer-PEER; on exit the namespace
# goes (while the peer still runs: its finalizers need it), then TEARDOWN (a command) runs, then
# hack/peers/PEER.sh down, if the peer has such a script.
peer_test() {
  ns=e2e-peer-$1
  echo "test-peer-$1" >&2
  # shellcheck disable=SC2064  # expanded now, on purpose
  trap "peer_cleanup $1 ${2:-}" EXIT
}
peer_cleanup() {
  k delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  if [[ -n ${2:-} ]]; then "$2" || true; fi
  if [[ -x $hack_dir/peers/$1.sh ]]; then "$hack_dir/peers/$1.sh" down || true; fi
}

# seed001_jobs [MAKE]: seed 001's jobs in $ns, as test-deadlock.sh makes them: a 50-pod quick job,
# then together two 20-pod indexed jobs (job1, job2) of 316Mi pods that finish only once all 20
# run. MAKE NAME PODS [key=value...] prints each (default job_yaml; a peer's adds its marks, and may
# print objects a job needs before it). Sets t0, the time the first was sent.
seed001_jobs() {
  local make=${1:-job_yaml}
  t0=$(date +%s.%N)
  "$make" quick-job 50 run=1 memory=1 | k -n "$ns" create -f - >/dev/null
  { "$make" job1 20 run=5 after=all-ready indexed=1 memory=316Mi; echo ---;
    "$make" job2 20 run=5 after=all-ready indexed=1 memory=316Mi; } | k -n "$ns" create -f - >/dev/null
}

# seed001_pods: one sample of $ns's pods, a line each: Pod:JOB:NODE:PHASE
seed001_pods() {
  k -n "$ns" get pods -o jsonpath='{range .items[*]}Pod:{.metadata.labels.job-name}:{.spec.nodeName}:{.status.phase}{"\n"}{end}'
}

# seed001_watch [sample=CMD] [each=CMD] [stuck=CMD]: sample $ns every 0.5 s until all three Jobs
# are complete; after PEER_TIMEOUT seconds (default 600) CMD stuck shows the peer's view, then the
# test fails. A sample: snap, the output of CMD sample (default seed001_pods; its lines begin as
# that one's do); b1, b2, the pods of job1, job2 bound and not finished; samples, and overlap (the
# samples in which both were > 0), counted; then CMD each, which must return 0. Sets wall (seconds).
seed001_watch() {
  local sample=seed001_pods each=: stuck=: kv
  for kv in "$@"; do local "${kv%%=*}"="${kv#*=}"; done
  local timeout=${PEER_TIMEOUT:-600} deadline
  deadline=$(( $(date +%s) + timeout ))
  samples=0 overlap=0 b1=0 b2=0
  while :; do
    snap=$("$sample")
    b1=$(awk -F: '$1=="Pod" && $2=="job1" && $3!="" && $4!="Succeeded" && $4!="Failed"' <<<"$snap" | wc -l)
    b2=$(awk -F: '$1=="Pod" && $2=="job2" && $3!="" && $4!="Succeeded" && $4!="Failed"' <<<"$snap" | wc -l)
    samples=$((samples + 1))
    if (( b1 > 0 && b2 > 0 )); then overlap=$((overlap + 1)); fi
    "$each"
    if job_complete "$ns" job1 && job_complete "$ns" job2 && job_complete "$ns" quick-job; then break; fi
    if (( $(date +%s) >= deadline )); then
      "$stuck" >&2 || true
      fail "not every job completed within ${timeout}s (job1 $b1, job2 $b2 pods bound)"
    fi
    sleep 0.5
  done
  wall=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
  pass "all three jobs completed in ${wall}s"
}

# check_no_pod_failed: no pod in $ns ended Failed.
check_no_pod_failed() {
  local failed
  failed=$(k -n "$ns" get pods --field-selector status.phase=Failed -o name | wc -l)
  check "no pod failed ($failed)" test "$failed" -eq 0
}
