#!/usr/bin/env bash
# e2e, peer: seed 001 under kube-scheduler's own gang scheduling (KEP-4671: the Workload and
# PodGroup APIs of scheduling.k8s.io/v1beta1 and the GangScheduling plugin, beta in Kubernetes
# 1.37), not muster. Needs only what hack/cluster-up.sh already sets: the GenericWorkload gate on
# kube-apiserver, kube-controller-manager and kube-scheduler, and scheduling.k8s.io/v1beta1 served.
# Cluster: scenarios/clusters/seed-deadlock.yaml (4 nodes x 2107Mi: 24 pods of 316Mi fit).
# The same jobs as test-deadlock.sh (a 50-pod quick job, two 20-pod indexed jobs of 316Mi pods that
# finish only once all 20 run), under the default scheduler. Each big job gets objects of the shape
# the Job controller makes itself under the alpha WorkloadWithJob gate (off here): a Workload with
# one gang PodGroupTemplate of minCount 20 and a PodGroup made from it, which the Job's pod
# template names in spec.schedulingGroup.podGroupName. The quick job has no group (basic
# scheduling, the Job default). Checks every Job completes within PEER_TIMEOUT seconds (default
# 600), no pod failed, both PodGroups reached PodGroupInitiallyScheduled=True, the gangs bound
# whole (no sample saw both big jobs part-bound) and the second only after the first had run.
# Prints the wall time and gang counters: samples where a PodGroup was Unschedulable, where its
# gang held back though some of its pods would have fit, the scheduler's rejections, and the
# handover (first gang's Job complete to second gang's first bind).
# Run only when named: hack/e2e/run.sh peer-native (make peers).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
gang=20
peer_test native

# The native group API must be served (the GenericWorkload gate and the v1beta1 runtime-config).
served=$(k api-resources --api-group=scheduling.k8s.io -o name 2>/dev/null | tr '\n' ' ')
check "scheduling.k8s.io serves workloads and podgroups ($served)" \
  bash -c "[[ ' $served ' == *' workloads.scheduling.k8s.io '* && ' $served ' == *' podgroups.scheduling.k8s.io '* ]]"
fresh_namespace "$ns"

# native_objects JOB: the Workload (one gang template "workers", minCount $gang, controllerRef
# to the Job) and its runtime PodGroup JOB-workers (workloadRef to the template, the policy copied).
native_objects() {
  local job=$1 uid
  k -n "$ns" create -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: $job}
spec:
  controllerRef: {apiGroup: batch, kind: Job, name: $job}
  podGroupTemplates:
  - name: workers
    schedulingPolicy:
      gang: {minCount: $gang}
YAML
  uid=$(k -n "$ns" get workloads.scheduling.k8s.io "$job" -o jsonpath='{.metadata.uid}')
  k -n "$ns" create -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: $job-workers
  ownerReferences:
  - {apiVersion: scheduling.k8s.io/v1beta1, kind: Workload, name: $job, uid: $uid}
spec:
  workloadRef: {workloadName: $job, templateName: workers}
  schedulingPolicy:
    gang: {minCount: $gang}
YAML
}
# native_job_yaml NAME PODS [key=value...]: job_yaml; a big job's pods (not quick-job's: basic
# scheduling) belong to the PodGroup NAME-workers.
native_job_yaml() {
  if [[ $1 == quick-job ]]; then job_yaml "$@"; return; fi
  job_yaml "$@" | sed -e "s/^    spec:/    spec:\n      schedulingGroup: {podGroupName: $1-workers}/"
}

native_objects job1
native_objects job2
pass "Workloads and gang PodGroups (minCount $gang) for job1 and job2"

seed001_jobs native_job_yaml

# One list call a sample: the pods (Pod:job:node:phase, as seed001_pods) and the PodGroups (their
# PodGroupInitiallyScheduled condition), told apart by kind.
native_pods() {
  k -n "$ns" get pods,podgroups.scheduling.k8s.io -o jsonpath='{range .items[*]}{.kind}:{.metadata.labels.job-name}:{.spec.nodeName}:{.status.phase}:{.metadata.name}:{.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].status}/{.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].reason}{"\n"}{end}'
}
both_partial=0 partial1=0 partial2=0 full1=0 full2=0 unsched=0 waiting_bound=0 held_back=0
native_sample() {
  if (( b1 == gang )); then full1=1; fi
  if (( b2 == gang )); then full2=1; fi
  # Part-bound before the gang was ever whole: a gang still binding (the scheduler binds its
  # members one API call at a time after Permit lets them all go) or a broken gang.
  local p1=0 p2=0 j full bj bo
  if (( full1 == 0 && b1 > 0 )); then p1=1; partial1=$((partial1 + 1)); fi
  if (( full2 == 0 && b2 > 0 )); then p2=1; partial2=$((partial2 + 1)); fi
  if (( p1 && p2 )); then both_partial=$((both_partial + 1)); fi
  # A gang the scheduler reports Unschedulable (PodGroupInitiallyScheduled=False) while it is not
  # yet whole: it should hold no node at all, even when room for some of its pods is free (a
  # 316Mi slot is free while the other big job holds fewer than 24 of the 24 that fit).
  for j in 1 2; do
    if grep -q "^PodGroup::::job$j-workers:False/Unschedulable\$" <<<"$snap"; then
      unsched=$((unsched + 1))
      full=full$j bj=b$j bo=b$(( 3 - j ))
      if (( ${!full} == 0 )); then
        if (( ${!bj} > 0 )); then waiting_bound=$((waiting_bound + 1))
        elif (( ${!bo} < 24 )); then held_back=$((held_back + 1)); fi
      fi
    fi
  done
}
native_stuck() { k -n "$ns" get podgroups.scheduling.k8s.io -o yaml; }
seed001_watch sample=native_pods each=native_sample stuck=native_stuck

check_no_pod_failed
sg=$(k -n "$ns" get pods -l job-name=job1 -o jsonpath='{.items[0].spec.schedulingGroup.podGroupName}')
check "the Job controller kept spec.schedulingGroup on the pods (job1's name job1-workers: '$sg')" test "$sg" = job1-workers
check "no sample saw both big jobs part-bound before either was whole ($both_partial of $samples)" \
  test "$both_partial" -eq 0

# The gangs from the pods' own PodScheduled times (1 s resolution): how long each gang took to
# bind (first to last member), and whether the second gang's first bind came only once the first
# gang had run (all-ready stamp), as it must when both cannot fit.
# Handover: seconds from the first gang's Job completing to the second gang's first bind.
pods=$(k -n "$ns" get pods -l 'job-name in (job1,job2)' -o json)
done_at=$(k -n "$ns" get jobs -o jsonpath='{range .items[*]}{.metadata.name}={.status.completionTime} {end}')
read -r spread1 spread2 ordered first_gang handover <<<"$(DONE_AT="$done_at" python3 -c '
import json, os, sys
from datetime import datetime
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()
done = dict(kv.split("=", 1) for kv in os.environ["DONE_AT"].split())
pods = json.load(sys.stdin)["items"]
bound, ready = {}, {}
for p in pods:
    j = p["metadata"]["labels"]["job-name"]
    for c in p["status"].get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "True":
            bound.setdefault(j, []).append(t(c["lastTransitionTime"]))
    a = p["metadata"].get("annotations", {}).get("kwok.muster.dev/all-ready-at")
    if a:
        ready.setdefault(j, []).append(datetime.fromisoformat(a.replace("Z", "+00:00")).timestamp())
spread = {j: int(max(v) - min(v)) for j, v in bound.items()}
first, second = sorted(bound, key=lambda j: min(bound[j]))
ordered = int(first in ready and min(bound[second]) >= min(ready[first]))
handover = int(min(bound[second]) - t(done[first]))
print(spread.get("job1", -1), spread.get("job2", -1), ordered, first, handover)' <<<"$pods")"
echo "  ..   bind spread (first to last PodScheduled): job1 ${spread1}s, job2 ${spread2}s; $first_gang bound first; the other bound ${handover}s after $first_gang completed" >&2
check "the second gang bound only after the first gang was whole and ready" test "$ordered" -eq 1

# The scheduler's own verdict on each PodGroup: PodGroupInitiallyScheduled (terminal once True).
for j in job1 job2; do
  st=$(k -n "$ns" get podgroups.scheduling.k8s.io $j-workers \
    -o jsonpath='{.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].status} {.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].lastTransitionTime}')
  check "PodGroup $j-workers has PodGroupInitiallyScheduled=True (${st#* })" test "${st%% *}" = True
done
fs=$(k -n "$ns" get events --field-selector reason=FailedScheduling -o jsonpath='{range .items[*]}{.count}{"\n"}{end}' | awk '{s+=($1?$1:1)} END {print s+0}')
echo "  ..   samples: $samples; a PodGroup Unschedulable in $unsched, its gang holding pods in $waiting_bound, holding none though room was free in $held_back; part-bound job1 $partial1, job2 $partial2; FailedScheduling events $fs" >&2
# The scheduler's log: one line per pod each time a gang attempt ends short of minCount (logged at
# error level, "Error scheduling pod; retrying", though it is an ordinary wait; see docs/peers.md).
slog=${MUSTER_CLUSTER_DIR:-$MUSTER_CACHE/cluster}/logs/kube-scheduler.log
rejected=$(grep -c "minCount ($gang) cannot be satisfied.*podGroup=\"$ns/" "$slog" 2>/dev/null || true)
echo "  ..   samples with pods of both big jobs bound: $overlap; scheduler log lines of pods turned away with their gang: ${rejected:-0}" >&2
echo "result: peer=native-$K8S_VERSION seed=001 wall_seconds=$wall job_span_seconds=$(jobs_span "$ns") both_big_jobs_bound_samples=$overlap both_partial_samples=$both_partial podgroup_unschedulable_samples=$unsched gang_held_back_samples=$held_back waiting_gang_bound_samples=$waiting_bound gang_rejected_pod_lines=${rejected:-0} failed_scheduling_events=$fs bind_spread_seconds=$spread1,$spread2 handover_seconds=$handover" >&2
