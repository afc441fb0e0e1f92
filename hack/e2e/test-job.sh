#!/usr/bin/env bash
# e2e: a plain 10-pod Job, scheduled by the default kube-scheduler onto KWOK nodes, runs
# to completion through the real Job controller.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ns=e2e-job
echo "test-job" >&2
fresh_namespace $ns
job_yaml plain 10 run=3 | k -n $ns create -f - >/dev/null
eventually 90 "10-pod Job completes" job_complete $ns plain
check "all 10 pods Succeeded" test "$(pods_in_phase $ns job-name=plain Succeeded)" -eq 10
nodes=$(k -n $ns get pods -l job-name=plain -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u)
fake=$(k get nodes -o jsonpath='{range .items[?(@.metadata.annotations.kwok\.x-k8s\.io/node=="fake")]}{.metadata.name}{"\n"}{end}')
check "every pod was bound to a KWOK node" bash -c 'for n in $1; do grep -qx "$n" <<<"$2" || exit 1; done' _ "$nodes" "$fake"
check "scheduled by the default scheduler" test "$(k -n $ns get pods -l job-name=plain -o jsonpath='{.items[*].spec.schedulerName}' | tr ' ' '\n' | sort -u)" = default-scheduler
k delete namespace $ns --wait=false >/dev/null
