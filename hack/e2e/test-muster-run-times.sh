#!/usr/bin/env bash
# e2e: run times learned. Jobs that declare no run time (no muster.dev/duration-seconds) are
# planned with how long the last Jobs of their kind held their nodes. Three Jobs of one kind that
# each need every worker node: while the first runs and nothing is learned, the second waits with
# no estimated start (the first runs "forever" for the planner); once the first has finished,
# the third, waiting behind the second, is reserved with an estimated start, and its status says
# where the run time came from.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-run-times
echo "test-muster-run-times" >&2
muster_in_namespace $ns

# whole NAME SECONDS: a Job of one pod per worker node (60 of 100 cpu), running SECONDS once ready;
# the run time is the harness's (KWOK), not part of the request: the three are of one kind.
whole() { queued_job_yaml "$1" 100 cpu=60 run="$2" | k -n $ns create -f - >/dev/null; }
status() { k -n $ns get groups.muster.dev "$1" -o jsonpath="$2"; }

whole first 12
eventually 30 "Job first takes every worker node" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev first -o jsonpath='{.status.allocation[*].node}' | wc -w) -eq 100 ]]"
# second runs long enough for third to wait behind it.
whole second 30
eventually 30 "Job second waits behind it" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev second -o jsonpath='{.status.phase}') == Queued ]]"
# The queue view is refreshed every 5 s: read it after one refresh, while first still runs.
sleep 6
if [[ $(status first '{.status.phase}') == Running ]]; then
  check "with nothing learned, second has no estimated start" test -z "$(status second '{.status.estimatedStart}')"
else
  echo "skipped: first ended before the queue view could be read" >&2
fi

eventually 60 "first finishes and second takes the nodes" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev first second -o jsonpath='{.items[*].status.phase}') == 'Succeeded Running' ]]"
whole third 5
eventually 30 "third, behind second, is reserved with an estimated start" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev third -o jsonpath='{.status.phase}') == Reserved &&
      -n \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev third -o jsonpath='{.status.estimatedStart}') ]]"
eventually 15 "its status says the run time it is planned with was learned" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get groups.muster.dev third -o jsonpath='{.status.message}' | grep -q 'no run time declared: planned as'"
echo "third: $(status third '{.status.message}'); estimated start $(status third '{.status.estimatedStart}')" >&2
eventually 120 "all three complete" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get job first second third -o jsonpath='{.items[*].status.succeeded}') == '100 100 100' ]]"
# third was estimated while it waited and then admitted: its estimate is scored.
check "the error of third's estimated start is measured" \
  test "$(muster_metric muster_estimated_start_error_ratio_count)" -ge 1
echo "estimated start error of third (over its wait): $(muster_metric muster_estimated_start_error_ratio_sum)" >&2
