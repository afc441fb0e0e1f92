#!/usr/bin/env bash
# e2e: seed 001's deadlock, reproduced with the default kube-scheduler alone.
# Cluster: scenarios/clusters/seed-deadlock.yaml (4 nodes x 2107Mi: 24 pods of 316Mi fit).
# A 50-pod quick job (1 byte of memory each), then, at the same moment, two 20-pod indexed
# Jobs of 316Mi pods that only finish once *all* their 20 pods run (run-after all-ready).
# One big job fits, two do not. The default scheduler places pods one at a time, so both
# big jobs grab part of the memory and neither can ever complete: the clogging muster
# exists to prevent. The test asserts exactly that.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-deadlock
echo "test-deadlock" >&2

# big_running JOB: pods of JOB that are Running
big_running() { pods_in_phase $ns "job-name=$1" Running; }

attempt() {
  fresh_namespace $ns
  job_yaml quick-job 50 run=1 memory=1 | k -n $ns create -f - >/dev/null
  { job_yaml job1 20 run=5 after=all-ready indexed=1 memory=316Mi; echo ---;
    job_yaml job2 20 run=5 after=all-ready indexed=1 memory=316Mi; } | k -n $ns create -f - >/dev/null
  eventually 120 "the quick job completes" job_complete $ns quick-job
  # Wait until the placement settles: running counts unchanged for 10 s.
  local last="" now stable=0 deadline=$(( $(date +%s) + 120 ))
  while (( stable < 10 )); do
    now="$(big_running job1) $(big_running job2)"
    if [[ $now == "$last" ]]; then stable=$((stable + 1)); else stable=0; last=$now; fi
    (( $(date +%s) < deadline )) || fail "placement did not settle"
    sleep 1
  done
  read -r r1 r2 <<<"$last"
  echo "  ..   settled: job1 $r1/20 running, job2 $r2/20 running" >&2
  if job_complete $ns job1 || job_complete $ns job2 || (( r1 == 20 || r2 == 20 )); then
    return 1  # one job got all its pods first: no deadlock this time
  fi
  return 0
}

tries=0
until attempt; do
  tries=$((tries + 1))
  (( tries < 3 )) || fail "one big job always got all its pods first (3 tries): no deadlock reproduced"
  echo "  ..   one job won the race outright; retrying ($tries)" >&2
done

r1=$(big_running job1); r2=$(big_running job2)
check "job1 is partly running ($r1/20)" test "$r1" -gt 0 -a "$r1" -lt 20
check "job2 is partly running ($r2/20)" test "$r2" -gt 0 -a "$r2" -lt 20
check "together they fill the memory that one job needs ($((r1 + r2)) >= 20 pods)" test $((r1 + r2)) -ge 20
pending=$(( $(pods_in_phase $ns job-name=job1 Pending) + $(pods_in_phase $ns job-name=job2 Pending) ))
check "the rest of their pods are Pending ($pending)" test "$pending" -eq $((40 - r1 - r2))
check "the scheduler reports them unschedulable for memory" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get events --field-selector reason=FailedScheduling -o jsonpath='{.items[*].message}' | grep -q 'Insufficient memory'"
sleep 8  # longer than their 5 s run time: had either gang become whole, it would finish now
check "neither big job has a ready gang (no pod stamped all-ready)" test -z "$(k -n $ns get pods -l 'job-name in (job1,job2)' -o jsonpath='{.items[*].metadata.annotations.kwok\.muster\.dev/all-ready-at}')"
check "no pod of either big job succeeded" test $(( $(pods_in_phase $ns job-name=job1 Succeeded) + $(pods_in_phase $ns job-name=job2 Succeeded) )) -eq 0
neither_complete() { ! job_complete $ns job1 && ! job_complete $ns job2; }
check "neither big job completed" neither_complete
k delete namespace $ns --wait=false >/dev/null
