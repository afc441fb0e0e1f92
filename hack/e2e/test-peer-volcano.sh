#!/usr/bin/env bash
# e2e, peer: seed 001 under the real Volcano (hack/peers/volcano.sh, docs/peers.md), not muster.
# Cluster: scenarios/clusters/seed-deadlock.yaml (4 nodes x 2107Mi). The same batch/v1 Jobs as
# test-deadlock.sh (a 50-pod quick job, two 20-pod indexed jobs of 316Mi pods that finish only
# once all 20 run), handed to Volcano the way its PodGroup controller supports plain workloads:
# the pods carry schedulerName volcano, and each big Job the annotation
# scheduling.volcano.sh/group-min-member: "20", so Volcano makes one PodGroup per Job with
# minMember 20 (the quick job gets its own PodGroup, minMember 1). Queue: Volcano's `default`.
# Checks every Job completes within PEER_TIMEOUT seconds (default 600), no pod failed, each big
# Job had a PodGroup of minMember 20; counts the samples with pods of both big jobs bound.
# Run only when named: hack/e2e/run.sh peer-volcano (make peers).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-peer-volcano
timeout=${PEER_TIMEOUT:-600}
peers=$hack_dir/peers
echo "test-peer-volcano" >&2

cleanup() {
  k delete namespace $ns --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  "$peers/volcano.sh" down || true
}
trap cleanup EXIT
"$peers/volcano.sh" up
pass "Volcano $VOLCANO_VERSION up (vc-scheduler, vc-controller-manager, CRDs, queue default Open)"
fresh_namespace $ns

# volcano_job_yaml NAME PODS MIN [key=value...]: job_yaml with the pods given to the scheduler
# `volcano` in queue `default`; MIN > 1 annotates the Job with its PodGroup's minMember.
volcano_job_yaml() {
  local name=$1 pods=$2 min=$3; shift 3
  local ann=""
  (( min > 1 )) && ann="\n  annotations: {scheduling.volcano.sh/group-min-member: \"$min\"}"
  job_yaml "$name" "$pods" "$@" | sed -e "s|^metadata:|metadata:$ann|" \
    -e 's|^    spec:|    spec:\n      schedulerName: volcano|' \
    -e 's|^      annotations:|      annotations:\n        scheduling.volcano.sh/queue-name: default|'
}

t0=$(date +%s.%N)
volcano_job_yaml quick-job 50 1 run=1 memory=1 | k -n $ns create -f - >/dev/null
{ volcano_job_yaml job1 20 20 run=5 after=all-ready indexed=1 memory=316Mi; echo ---;
  volcano_job_yaml job2 20 20 run=5 after=all-ready indexed=1 memory=316Mi; } | k -n $ns create -f - >/dev/null

# pg_of JOB: the name of the PodGroup Volcano made for JOB's pods (podgroup-<job uid>)
pg_of() { echo "podgroup-$(k -n $ns get job "$1" -o jsonpath='{.metadata.uid}')"; }

overlap=0 b1=0 b2=0
deadline=$(( $(date +%s) + timeout ))
while :; do
  snap=$(k -n $ns get pods -o jsonpath='{range .items[*]}{.metadata.labels.job-name}:{.spec.nodeName}:{.status.phase}{"\n"}{end}')
  b1=$(awk -F: '$1=="job1" && $2!="" && $3!="Succeeded" && $3!="Failed"' <<<"$snap" | wc -l)
  b2=$(awk -F: '$1=="job2" && $2!="" && $3!="Succeeded" && $3!="Failed"' <<<"$snap" | wc -l)
  (( b1 > 0 && b2 > 0 )) && overlap=$((overlap + 1))
  if job_complete $ns job1 && job_complete $ns job2 && job_complete $ns quick-job; then break; fi
  if (( $(date +%s) >= deadline )); then
    k -n $ns get podgroups.scheduling.volcano.sh -o wide >&2 || true
    k get queues.scheduling.volcano.sh -o wide >&2 || true
    fail "not every job completed within ${timeout}s (job1 $b1, job2 $b2 pods bound)"
  fi
  sleep 0.5
done
wall=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
pass "all three jobs completed in ${wall}s"

for j in job1 job2; do
  min=$(k -n $ns get podgroups.scheduling.volcano.sh "$(pg_of $j)" -o jsonpath='{.spec.minMember}' 2>/dev/null || true)
  check "$j ran as a Volcano PodGroup of minMember 20 (${min:-none})" test "${min:-0}" -eq 20
done
failed=$(k -n $ns get pods --field-selector status.phase=Failed -o name | wc -l)
check "no pod failed ($failed)" test "$failed" -eq 0
# When each big job's PodGroup went Inqueue / Running (conditions and events of Volcano).
for j in job1 job2; do
  echo "  ..   $j: $(k -n $ns get podgroups.scheduling.volcano.sh "$(pg_of $j)" \
    -o jsonpath='phase {.status.phase}, succeeded {.status.succeeded}; {range .status.conditions[*]}{.type} {.lastTransitionTime}; {end}')" >&2
done
unsched=$(k -n $ns get events -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | grep -c -x -e Unschedulable -e FailedScheduling || true)
echo "  ..   Unschedulable/FailedScheduling events: $unsched; the most frequent messages:" >&2
k -n $ns get events -o jsonpath='{range .items[*]}{.reason}|{.involvedObject.kind}|{.message}{"\n"}{end}' |
  awk -F'|' '$1=="Unschedulable" || $1=="FailedScheduling" {print $2 ": " $3}' | sed -E 's/[0-9]+/N/g' |
  sort | uniq -c | sort -rn | head -n 4 | sed 's/^/  ..     /' >&2 || true
echo "  ..   samples with pods of both big jobs bound: $overlap" >&2
echo "result: peer=volcano-$VOLCANO_VERSION seed=001 wall_seconds=$wall job_span_seconds=$(jobs_span $ns) unschedulable_events=$unsched both_big_jobs_bound_samples=$overlap" >&2
