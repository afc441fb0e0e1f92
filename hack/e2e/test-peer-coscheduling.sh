#!/usr/bin/env bash
# e2e, peer: seed 001 under the real scheduler-plugins coscheduling (hack/peers/coscheduling.sh,
# docs/peers.md), not muster. Cluster: scenarios/clusters/seed-deadlock.yaml (4 nodes x 2107Mi).
# The same jobs as test-deadlock.sh (a 50-pod quick job, two 20-pod indexed jobs of 316Mi pods
# that finish only once all 20 run), every pod naming the coscheduling scheduler; each big job
# has a PodGroup of minMember 20 and its pods carry scheduling.x-k8s.io/pod-group (the plugin's
# README); the PodGroups are created with the big jobs, after the quick job (the plugin's queue
# sort orders a group's pods by its PodGroup's creation time). Checks every Job completes within
# PEER_TIMEOUT seconds (default 600), no pod failed, every pod named the coscheduling scheduler,
# the gang held (each big job's 20 pods bound within 2 s of one another) and the scheduler-plugins
# controller marked both PodGroups Finished; counts, as test-peer-kueue.sh does, the samples in
# which pods of both big jobs were bound at once.
# Run only when named: hack/e2e/run.sh peer-coscheduling (make peers).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
scheduler_name=${COSCHEDULING_SCHEDULER_NAME:-coscheduling}
sched_log=$MUSTER_CLUSTER_DIR/logs/coscheduling-scheduler.log

peer_test coscheduling
"$hack_dir/peers/coscheduling.sh" up
pass "scheduler-plugins $SCHEDULER_PLUGINS_VERSION up (kube-scheduler as '$scheduler_name', controller, CRDs)"
log_from=$(( $(wc -l < "$sched_log") + 1 ))
# cpu_seconds: CPU time (user + system) the coscheduling scheduler has used so far
cpu_seconds() {
  local pid; pid=$(cat "$MUSTER_CLUSTER_DIR/coscheduling/coscheduling-scheduler.pid")
  awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz}' "/proc/$pid/stat"
}
cpu0=$(cpu_seconds)
fresh_namespace "$ns"

# cosched_job_yaml NAME PODS [key=value...]: job_yaml whose pods name the coscheduling scheduler;
# a big job's (job1, job2) carry the label of a PodGroup of minMember 20 named after it, created
# just before it (the plugin's README: a PodGroup per gang; it rejects a pod whose PodGroup it
# cannot find). Order matters: the plugin's queue sort puts a group's pods at its PodGroup's
# creation time, and the quick job comes first (seed001_jobs).
cosched_job_yaml() {
  local edits=(-e "s/^    spec:/    spec:\n      schedulerName: $scheduler_name/")
  if [[ $1 != quick-job ]]; then
    printf 'apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: %s}\nspec: {minMember: 20}\n---\n' "$1"
    edits+=(-e "s/^    metadata:/    metadata:\n      labels: {scheduling.x-k8s.io\/pod-group: $1}/")
  fi
  job_yaml "$@" | sed "${edits[@]}"
}

# Per sample, besides seed001_watch's: n1, n2 = pods ever bound (any phase). A gang is partly
# placed in a sample where 0 < nJ < 20 (before its first whole placement; a handful of pods
# binding one after another shows as one or two samples).
max1=0 max2=0 partial1=0 partial2=0
cosched_sample() {
  local n1 n2
  n1=$(awk -F: '$2=="job1" && $3!=""' <<<"$snap" | wc -l)
  n2=$(awk -F: '$2=="job2" && $3!=""' <<<"$snap" | wc -l)
  if (( n1 > 0 && n1 < 20 )); then partial1=$((partial1 + 1)); fi
  if (( n2 > 0 && n2 < 20 )); then partial2=$((partial2 + 1)); fi
  if (( b1 > max1 )); then max1=$b1; fi
  if (( b2 > max2 )); then max2=$b2; fi
}
cosched_stuck() { k -n "$ns" get podgroups.scheduling.x-k8s.io -o wide; }
seed001_jobs cosched_job_yaml
seed001_watch each=cosched_sample stuck=cosched_stuck
cpu=$(python3 -c "print(f'{$(cpu_seconds) - $cpu0:.1f}')")

check_no_pod_failed
others=$(k -n "$ns" get pods -o jsonpath='{range .items[*]}{.spec.schedulerName}{"\n"}{end}' | grep -vcx "$scheduler_name" || true)
check "every pod named the coscheduling scheduler ($others did not)" test "$others" -eq 0
# Bound by that scheduler: its Scheduled events name it as their reporting controller.
by=$(k -n "$ns" get events --field-selector reason=Scheduled -o jsonpath='{range .items[*]}{.reportingComponent}{"\n"}{end}' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
echo "  ..   Scheduled events by reporter: $by" >&2
# The gang held: each big job's 20 pods were bound together, within 2 s of one another (the
# PodScheduled condition's transition time; 1 s resolution), not a few at a time.
bind_spread() { # bind_spread JOB: seconds between the first and the last bind of JOB's pods
  k -n "$ns" get pods -l job-name="$1" -o json | python3 -c '
import json, sys
from datetime import datetime
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()
ts = [t(c["lastTransitionTime"]) for p in json.load(sys.stdin)["items"] for c in p["status"].get("conditions", [])
      if c["type"] == "PodScheduled" and c["status"] == "True"]
print(int(max(ts) - min(ts)) if len(ts) == 20 else -1)'
}
for j in job1 job2; do
  spread=$(bind_spread $j)
  check "the gang held: $j's 20 pods were bound within 2 s of one another ($spread s)" test "$spread" -ge 0 -a "$spread" -le 2
done
echo "  ..   most pods bound at once: job1 $max1, job2 $max2" >&2
# PodGroup status, as the scheduler-plugins controller keeps it.
eventually 30 "the controller marked both PodGroups Finished" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get podgroups.scheduling.x-k8s.io -o jsonpath='{.items[*].status.phase}') == 'Finished Finished' ]]"
for g in job1 job2; do
  echo "  ..   PodGroup $g: $(k -n "$ns" get podgroups.scheduling.x-k8s.io $g \
    -o jsonpath='phase {.status.phase}, succeeded {.status.succeeded}, occupied by {.status.occupiedBy}')" >&2
done
# What the plugin did on the way: pods held at Permit, groups rejected (PostFilter, Unreserve).
waits=$(tail -n +"$log_from" "$sched_log" | grep 'Pod is waiting to be scheduled to node' |
  grep -o "pod=\"$ns/[a-z0-9-]*" | sed -E 's/.*\/(job[12]|quick-job)-.*/\1/' | sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')
rejects=$(k -n "$ns" get events --field-selector reason=FailedScheduling -o jsonpath='{range .items[*]}{.count}{" "}{.message}{"\n"}{end}' |
  awk '{n += ($1 ~ /^[0-9]+$/ && $1 > 0) ? $1 : 1} END {print n + 0}')
echo "  ..   pods held at Permit: $waits; FailedScheduling events: $rejects" >&2
# When each Job completed, counted from the first Job's creation (1 s resolution).
echo "  ..   completed after: $(k -n "$ns" get jobs -o json | python3 -c '
import json, sys
from datetime import datetime
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()
jobs = json.load(sys.stdin)["items"]
t0 = min(t(j["metadata"]["creationTimestamp"]) for j in jobs)
print(", ".join(j["metadata"]["name"] + " " + str(int(t(j["status"]["completionTime"]) - t0)) + "s" for j in jobs))')" >&2
echo "  ..   CPU the coscheduling scheduler used while the jobs ran: ${cpu}s; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "  ..   samples with a big job partly bound: job1 $partial1, job2 $partial2 (of $samples)" >&2
echo "  ..   samples with pods of both big jobs bound: $overlap (of $samples)" >&2
echo "result: peer=coscheduling-$SCHEDULER_PLUGINS_VERSION seed=001 wall_seconds=$wall job_span_seconds=$(jobs_span "$ns") both_big_jobs_bound_samples=$overlap" >&2
