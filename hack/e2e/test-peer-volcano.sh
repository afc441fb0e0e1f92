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

peer_test volcano
"$hack_dir/peers/volcano.sh" up
pass "Volcano $VOLCANO_VERSION up (vc-scheduler, vc-controller-manager, CRDs, queue default Open)"
fresh_namespace "$ns"

# volcano_job_yaml NAME PODS [key=value...]: job_yaml with the pods given to the scheduler
# `volcano` in queue `default`; a big job (not quick-job) is annotated with its PodGroup's
# minMember, all its pods.
volcano_job_yaml() {
  local ann=""
  [[ $1 != quick-job ]] && ann="\n  annotations: {scheduling.volcano.sh/group-min-member: \"$2\"}"
  job_yaml "$@" | sed -e "s|^metadata:|metadata:$ann|" \
    -e 's|^    spec:|    spec:\n      schedulerName: volcano|' \
    -e 's|^      annotations:|      annotations:\n        scheduling.volcano.sh/queue-name: default|'
}

# pg_of JOB: the name of the PodGroup Volcano made for JOB's pods (podgroup-<job uid>)
pg_of() { echo "podgroup-$(k -n "$ns" get job "$1" -o jsonpath='{.metadata.uid}')"; }

volcano_stuck() {
  k -n "$ns" get podgroups.scheduling.volcano.sh -o wide || true
  k get queues.scheduling.volcano.sh -o wide
}
seed001_jobs volcano_job_yaml
seed001_watch stuck=volcano_stuck

for j in job1 job2; do
  min=$(k -n "$ns" get podgroups.scheduling.volcano.sh "$(pg_of $j)" -o jsonpath='{.spec.minMember}' 2>/dev/null || true)
  check "$j ran as a Volcano PodGroup of minMember 20 (${min:-none})" test "${min:-0}" -eq 20
done
check_no_pod_failed
# When each big job's PodGroup went Inqueue / Running (conditions and events of Volcano).
for j in job1 job2; do
  echo "  ..   $j: $(k -n "$ns" get podgroups.scheduling.volcano.sh "$(pg_of $j)" \
    -o jsonpath='phase {.status.phase}, succeeded {.status.succeeded}; {range .status.conditions[*]}{.type} {.lastTransitionTime}; {end}')" >&2
done
unsched=$(k -n "$ns" get events -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | grep -c -x -e Unschedulable -e FailedScheduling || true)
echo "  ..   Unschedulable/FailedScheduling events: $unsched; the most frequent messages:" >&2
k -n "$ns" get events -o jsonpath='{range .items[*]}{.reason}|{.involvedObject.kind}|{.message}{"\n"}{end}' |
  awk -F'|' '$1=="Unschedulable" || $1=="FailedScheduling" {print $2 ": " $3}' | sed -E 's/[0-9]+/N/g' |
  sort | uniq -c | sort -rn | head -n 4 | sed 's/^/  ..     /' >&2 || true
echo "  ..   samples with pods of both big jobs bound: $overlap" >&2
echo "result: peer=volcano-$VOLCANO_VERSION seed=001 wall_seconds=$wall job_span_seconds=$(jobs_span "$ns") unschedulable_events=$unsched both_big_jobs_bound_samples=$overlap" >&2
