# Helpers for the harness e2e tests (sourced). Expects KUBECONFIG to point at the cluster.
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
