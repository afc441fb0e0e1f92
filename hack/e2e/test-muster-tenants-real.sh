#!/usr/bin/env bash
# e2e: scenarios/suite/tenants-reclaim-sixtieth.yaml under muster through the harness, on its 8
# KWOK nodes of 8 GPUs (scenarios/clusters/gpu-8.yaml): four teams in one cohort, each with a
# Queue of 16 GPUs (reclaimWithinCohort) and a namespace of its own (`muster-harness objects
# --peer muster --setup`); team A borrows the idle quarters, teams B, C and D come back for them.
# Checked on the run's figures (`muster-harness run --scenario`):
#   1  every job completes;
#   2  no gang ever holds part of its nodes: the longest any job had some but not all of its pods
#      bound is under 5 s (the moment a bind burst takes), which also means borrowers are evicted
#      whole (an eviction that left some pods bound would show as a partial gang until they went);
#   3  reclaim happened: team A (the borrower) was evicted at least once;
#   4  the returning teams get their quota back: no job of teams B, C and D that arrived within
#      its team's quota waited more than WAIT_BOUND_S (default 10 s; at 1/60 scale, 10 min of the
#      full scenario, where the simulator's muster waits under a second).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-muster-tenants-real" >&2
scenario=$repo_dir/scenarios/suite/tenants-reclaim-sixtieth.yaml
tmp=$(mktemp -d)
teams=(team-a team-b team-c team-d)
cleanup() {
  # The teams' namespaces (with their Jobs) and Queues go, so later tests find none of them.
  k delete namespace "${teams[@]}" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  k delete queues.muster.dev "${teams[@]}" --ignore-not-found >/dev/null 2>&1 || true
  muster_down
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
resolve_harness_bin
muster_up
"$MUSTER_HARNESS_BIN" jobs "$scenario" 1 "$tmp/jobs.json"
"$MUSTER_HARNESS_BIN" objects "$scenario" --peer muster --setup | k apply -f - >/dev/null
"$MUSTER_HARNESS_BIN" run "$tmp/jobs.json" "$KUBECONFIG" default "$tmp/real.json" 900 --peer muster \
  --scenario "$scenario" --seed 1 || fail "muster-harness run failed"

# verdict WHAT PYTHON_EXPRESSION: check one property of the run (r: the run's JSON, t: its
# tenants by name).
verdict() {
  check "$1" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = {x["queue"]: x for x in r["tenants"]}
bound = float(sys.argv[3])
ok = eval(sys.argv[2])
if not ok:
    print("    run: completed %s failed %s unfinished %s; partial gangs %s; tenants %s" % (
        r["completed"], r["failed"], r["unfinished"], r.get("partial_gangs"), json.dumps(r["tenants"])), file=sys.stderr)
sys.exit(0 if ok else 1)' "$tmp/real.json" "$2" "${WAIT_BOUND_S:-10}"
}
verdict "every job completes" 'r["completed"] == r["jobs"] == 91'
verdict "no gang ever holds part of its nodes (longest partial under 5 s): borrowers are evicted whole" \
  'r["partial_gangs"]["longest_s"] < 5'
verdict "team A, the borrower, is evicted to hand quota back" 't["team-a"]["evictions"] > 0'
verdict "teams B, C and D get their quota back within ${WAIT_BOUND_S:-10} s" \
  'all(t[q]["wait_within_quota"]["count"] > 0 and t[q]["wait_within_quota"]["max_s"] <= bound for q in ("team-b", "team-c", "team-d"))'
