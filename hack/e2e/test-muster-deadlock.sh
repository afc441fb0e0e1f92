#!/usr/bin/env bash
# e2e, issue scenario 1: seed 001's deadlock with muster. The same jobs as test-deadlock.sh
# (a 50-pod quick job and two 20-pod indexed jobs that each need all the memory one big job
# fits in), submitted through the queue. Every job completes; at no sampled moment do pods of
# both big jobs hold resources; every bound pod runs on the node its Group assigned.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-deadlock
echo "test-muster-deadlock" >&2
trap muster_down EXIT
muster_up
fresh_namespace $ns

t0=$(date +%s.%N)
queued_job_yaml quick-job 50 run=1 memory=1 | k -n $ns create -f - >/dev/null
{ queued_job_yaml job1 20 run=5 after=all-ready indexed=1 memory=316Mi; echo ---;
  queued_job_yaml job2 20 run=5 after=all-ready indexed=1 memory=316Mi; } | k -n $ns create -f - >/dev/null

check "the webhook set schedulerName muster on both big jobs" test \
  "$(k -n $ns get job job1 job2 -o jsonpath='{range .items[*]}{.spec.template.spec.schedulerName} {end}')" = "muster muster "

overlap=0 checked=()
deadline=$(( $(date +%s) + 180 ))
while :; do
  snap=$(pod_snapshot $ns)
  b1=$(holding job1 "$snap")
  b2=$(holding job2 "$snap")
  if (( b1 > 0 && b2 > 0 )); then overlap=1; echo "  ..   both big jobs hold pods: job1 $b1, job2 $b2" >&2; fi
  for j in job1 job2; do
    n=$b1; [[ $j == job2 ]] && n=$b2
    if (( n == 20 )) && [[ " ${checked[*]} " != *" $j "* ]]; then
      # The Group's status may land a moment after its pods are bound (a group admitted in the
      # cycle that saw its Job has its object created beside its first status).
      eventually 3 "$j: every pod on the node its Group assigned" placed_on_assigned $ns $j
      checked+=("$j")
    fi
  done
  if job_complete $ns job1 && job_complete $ns job2 && job_complete $ns quick-job; then break; fi
  (( $(date +%s) < deadline )) || fail "not every job completed within 180s (job1 $b1, job2 $b2 bound)"
  sleep 0.5
done
wall=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
pass "all three jobs completed in ${wall}s (first create to the last seen Complete, polled every 0.5 s)"
check "no moment with pods of both big jobs holding resources" test $overlap -eq 0
check "both big jobs were seen whole and checked against their allocations" test ${#checked[@]} -eq 2
for j in quick-job job1 job2; do
  eventually 20 "group $j is Succeeded" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev $j -o jsonpath='{.status.phase}') == Succeeded ]]"
done
failed=$(k -n $ns get pods --field-selector status.phase=Failed -o name | wc -l)
check "no pod failed ($failed)" test "$failed" -eq 0
# One event per decision: on the Job, its Group related; none repeated on the Group.
events=$(k -n $ns get events -o jsonpath='{range .items[*]}{.reason}/{.involvedObject.kind}/{.related.kind} {end}')
check "muster recorded its decisions as events on the jobs, the groups related ($events)" \
  grep -q 'Admitted/Job/Group' <<<"$events"
check "and not once more on the groups" bash -c "! grep -q '/Group/' <<<'$events'"
echo "result: scheduler=muster seed=001 wall_seconds=$wall job_span_seconds=$(jobs_span $ns) both_big_jobs_bound=$overlap" >&2
k delete namespace $ns --wait=false >/dev/null
