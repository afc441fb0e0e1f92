#!/usr/bin/env bash
# e2e: pods made ahead of a reserved start. A Job reserved to start within its queue's
# createPodsAheadSeconds (default 60) is released early: the Job controller makes its pods while
# the nodes are still busy, they wait unbound, and muster binds them once the group is admitted,
# each on the node its Group assigned. A Job whose activeDeadlineSeconds would count while it
# waits stays suspended until it is admitted.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-ahead
echo "test-muster-ahead" >&2
muster_in_namespace $ns

# whole NAME SECONDS [DEADLINE]: a Job of one pod per worker node (60 of 100 cpu) that runs
# SECONDS once ready and declares it; with DEADLINE, spec.activeDeadlineSeconds too.
whole() {
  local extra=""
  [[ -n ${3:-} ]] && extra="\n  activeDeadlineSeconds: $3"
  queued_job_yaml "$1" 100 cpu=60 run="$2" |
    sed -e "s/^metadata:/metadata:\n  annotations: {muster.dev\/duration-seconds: \"$2\"}/" -e "s/^spec:/spec:$extra/" |
    k -n $ns create -f - >/dev/null
}
pods_made() { k -n $ns get pods -l job-name="$1" -o name | wc -l; }
pods_bound() { k -n $ns get pods -l job-name="$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }

whole first 40
eventually 30 "first takes every worker node" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev first -o jsonpath='{.status.phase}') == Running ]]"
whole second 5
whole third 5 600
eventually 30 "second, reserved behind first, has its 100 pods made while first runs" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l job-name=second -o name | wc -l) -eq 100 ]]"
check "first still runs ($(group_phase $ns first))" test "$(group_phase $ns first)" = Running
check "none of second's pods is bound ($(pods_bound second))" test "$(pods_bound second)" -eq 0
check "muster said so on the Job" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get events --field-selector involvedObject.name=second -o jsonpath='{.items[*].reason}' | grep -qw CreatingPodsAhead"
check "third, whose deadline would count while it waits, is still suspended with no pod" \
  test "$(k -n $ns get job third -o jsonpath='{.spec.suspend}')/$(pods_made third)" = true/0
# Sampled until second's pods are all bound (first runs 40 s; second is reserved once it has
# waited 10 s, twice its declared 5 s, under the default selective policy): no pod of second is
# bound while a pod of first still holds its node.
overlap=0
deadline=$(( $(date +%s) + 90 ))
while :; do
  snap=$(pod_snapshot $ns)
  b1=$(holding first "$snap")
  b2=$(awk -F: '$1=="second" && $2!=""' <<<"$snap" | wc -l)
  if (( b1 > 0 && b2 > 0 )); then overlap=1; echo "  ..   first holds $b1 nodes while $b2 pods of second are bound" >&2; fi
  (( b2 < 100 )) || break
  (( $(date +%s) < deadline )) || fail "second's pods not all bound within 90 s ($b2)"
  sleep 0.5
done
check "no pod of second was bound while first held its nodes" test $overlap -eq 0
runs_whole $ns second job-name=second 100
eventually 90 "all three complete" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get job first second third -o jsonpath='{.items[*].status.succeeded}') == '100 100 100' ]]"
# The hand-over, from a Job's completion to the last pod of the next one bound (1 s resolution):
# second's pods were made ahead, third's (its deadline) only once it was admitted.
handover() { # handover PREV NEXT
  k -n $ns get job "$1" -o json | python3 -c '
import json, subprocess, sys
from datetime import datetime
t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
done = t(json.load(sys.stdin)["status"]["completionTime"])
pods = json.loads(subprocess.check_output([sys.argv[1], "-n", sys.argv[2], "get", "pods", "-l", "job-name=" + sys.argv[3], "-o", "json"]))
bound = [t(c["lastTransitionTime"]) for p in pods["items"] for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled"]
print(f"{max(bound) - done:.0f}")' "$K8S_BIN/kubectl" $ns "$2"
}
echo "result: pods all bound after the Job before completed: second (made ahead) $(handover first second) s, third (made at admission) $(handover second third) s" >&2
