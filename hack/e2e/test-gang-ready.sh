#!/usr/bin/env bash
# e2e: pods annotated kwok.muster.dev/run-after=all-ready finish a set time after *every*
# pod of their Job is ready (muster-gang-ready stamps them, a KWOK stage completes them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-gang
echo "test-gang-ready" >&2
fresh_namespace $ns
job_yaml gang 6 run=3 after=all-ready indexed=1 | k -n $ns create -f - >/dev/null
eventually 90 "6-pod all-ready Job completes" job_complete $ns gang
stamps=$(k -n $ns get pods -l job-name=gang -o jsonpath='{range .items[*]}{.metadata.annotations.kwok\.muster\.dev/all-ready-at}{"\n"}{end}' | sort -u)
check "all 6 pods carry one kwok.muster.dev/all-ready-at stamp ($stamps)" test "$(wc -l <<<"$stamps")" -eq 1 -a -n "$stamps"
check "no pod finished before stamp + 3s" python3 - "$stamps" "$(k -n $ns get pods -l job-name=gang -o jsonpath='{range .items[*]}{.status.containerStatuses[0].state.terminated.finishedAt}{"\n"}{end}')" <<'PY'
import sys, datetime as dt
p = lambda s: dt.datetime.strptime(s.strip(), "%Y-%m-%dT%H:%M:%SZ")
stamp = p(sys.argv[1])
sys.exit(0 if all(p(f) >= stamp + dt.timedelta(seconds=3) for f in sys.argv[2].split()) else 1)
PY
# A gang that cannot become whole is never stamped and never finishes.
job_yaml toobig 3 run=1 after=all-ready cpu=1000 | k -n $ns create -f - >/dev/null
sleep 5
check "a Job whose pods cannot all run is never stamped" test -z "$(k -n $ns get pods -l job-name=toobig -o jsonpath='{.items[*].metadata.annotations.kwok\.muster\.dev/all-ready-at}')"
k delete namespace $ns --wait=false >/dev/null
