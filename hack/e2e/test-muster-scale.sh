#!/usr/bin/env bash
# e2e, issue scenarios 2 and 3: seed 002's scalability test (hack/e2e/test-scale.sh) through
# muster, on scenarios/clusters/seed-scalability.yaml (100 nodes of 100 cpu).
#
#   hack/e2e/test-muster-scale.sh [--kills K] [test-scale.sh options...]
#
# Every job completes and none fails (test-scale.sh also checks that no node is ever
# over-committed). With --kills K (scenario 3) the controller is killed with SIGKILL K times at
# random moments and restarted: still every job completes, nothing over-committed, and at the end
# no group holds an allocation.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
kills=0
args=()
while (( $# )); do
  case $1 in
    --kills) kills=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
ns=e2e-muster-scale
echo "test-muster-scale (kills: $kills)" >&2
trap muster_down EXIT
muster_up
out=$(mktemp)
"$(dirname "$0")/test-scale.sh" --scheduler muster --namespace $ns "${args[@]}" >"$out" &
scale_pid=$!
for i in $(seq 1 "$kills"); do
  sleep $(( 3 + RANDOM % 6 ))
  kill -0 $scale_pid 2>/dev/null || break
  muster_kill
  pass "killed the controller (SIGKILL, $i of $kills)"
  sleep $(( 1 + RANDOM % 2 ))
  muster_start
done
wait $scale_pid || { tail -n 30 "$muster_log" >&2; fail "the scale run failed"; }
line=$(tail -n 1 "$out")
echo "$line"
ok() { python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if $1 else 1)" "$line"; }
check "every job completed" ok "r['completed'] == r['jobs']"
check "no job failed" ok "r['failed'] == 0"
if (( kills > 0 )); then
  n=$(grep -c "recovered from the store" "$muster_log" || true)
  check "the controller recovered after each kill ($n recoveries)" test "$n" -ge $((kills + 1))
fi
# The controller's /metrics: it leads, and (without kills, which reset the counters) it counted
# the bindings it made.
check "the controller's /metrics says it leads" test "$(muster_metric muster_leader)" = 1
if (( kills == 0 )); then
  bound=$(muster_metric muster_pods_bound_total)
  check "the controller's /metrics counted its bindings (muster_pods_bound_total ${bound:-missing})" \
    test "${bound:-0}" -gt 0
  # Every job's admission is an event on it, each recorded one timed from its decision.
  jobs=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["jobs"])' "$line")
  events_recorded() {
    local recorded timed
    recorded=$(muster_metric 'muster_events_total{outcome="recorded"}')
    timed=$(muster_metric muster_event_delay_seconds_count)
    echo "events recorded: ${recorded:-none}, timed: ${timed:-none}, jobs: $jobs" >&2
    [[ -n $recorded && $recorded -ge $jobs && $recorded == "$timed" ]]
  }
  eventually 20 "the controller recorded an event per job at least, each timed" events_recorded
fi
# Every job finished: the store (what a restarted controller would recover) holds no allocation.
no_allocations() {
  [[ $(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("select count(*) from allocations").fetchone()[0])' "$muster_dir/muster.db") == 0 ]]
}
eventually 20 "no allocation is left behind in the store" no_allocations
