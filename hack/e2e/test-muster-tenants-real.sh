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
#      full scenario, where the simulator's muster waits under a second). A run that misses it
#      prints where those jobs waited (their timeline and events) and the scenario runs once
#      more, which must meet every check.
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
# run_scenario: the scenario's Jobs through the harness, measured into $tmp/real.json; the Jobs
# of a run before are deleted first (with their pods).
run_scenario() {
  local ns
  for ns in "${teams[@]}"; do
    k -n "$ns" delete jobs --all --cascade=foreground --wait=true >/dev/null
  done
  "$MUSTER_HARNESS_BIN" run "$tmp/jobs.json" "$KUBECONFIG" default "$tmp/real.json" 900 --peer muster \
    --scenario "$scenario" --seed 1 || fail "muster-harness run failed"
}
run_scenario

# holds PYTHON_EXPRESSION: whether one property of the run holds (r: the run's JSON, t: its
# tenants by name); if not, the run's figures are printed.
holds() {
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = {x["queue"]: x for x in r["tenants"]}
bound = float(sys.argv[3])
ok = eval(sys.argv[2])
if not ok:
    print("    run: completed %s failed %s unfinished %s; partial gangs %s; tenants %s" % (
        r["completed"], r["failed"], r["unfinished"], r.get("partial_gangs"), json.dumps(r["tenants"])), file=sys.stderr)
sys.exit(0 if ok else 1)' "$tmp/real.json" "$1" "${WAIT_BOUND_S:-10}"
}
# verdict WHAT PYTHON_EXPRESSION: check one property of the run.
verdict() { check "$1" holds "$2"; }
# verdicts: the properties every run must have.
verdicts() {
  verdict "every job completes" 'r["completed"] == r["jobs"] == 91'
  verdict "no gang ever holds part of its nodes (longest partial under 5 s): borrowers are evicted whole" \
    'r["partial_gangs"]["longest_s"] < 5'
  verdict "team A, the borrower, is evicted to hand quota back" 't["team-a"]["evictions"] > 0'
}
# On failure, each returning team's job that waited longer than the bound (from the run's
# timeline: submitted, last pod made, last pod bound; the first five) and its events say where
# it waited.
late_jobs() {
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
bound = float(sys.argv[2])
for t in r["timeline"]:
    if t["job"][0] in "bcd" and (t.get("bound_s") or 1e9) - t["submitted_s"] > bound:
        print(t["job"], t["submitted_s"], t.get("made_s"), t.get("bound_s"))' "$tmp/real.json" "${WAIT_BOUND_S:-10}"
}
what="teams B, C and D get their quota back within ${WAIT_BOUND_S:-10} s"
# quota_back: whether the returning teams got their quota back in time; if not, where they waited.
quota_back() {
  holds 'all(t[q]["wait_within_quota"]["count"] > 0 and t[q]["wait_within_quota"]["max_s"] <= bound for q in ("team-b", "team-c", "team-d"))' &&
    return 0
  local job submitted made bound ns
  while read -r job submitted made bound; do
    ns=team-${job:0:1}
    echo "    $ns/$job: submitted ${submitted}s, last pod made ${made}s, bound ${bound}s; its events:" >&2
    k -n "$ns" get events --field-selector "involvedObject.name=$job" --sort-by=.metadata.creationTimestamp \
      -o custom-columns=AT:.metadata.creationTimestamp,REASON:.reason,MESSAGE:.message 2>&1 | sed 's/^/      /' >&2
  done < <(late_jobs | head -n 5)
  # Every event of the teams' namespaces (muster's decisions, the Job controller's steps), by
  # time, and the run's figures: what to read for a run that missed the bound.
  local keep=$MUSTER_CLUSTER_DIR/logs/tenants-real-missed-$(date +%H%M%S)
  mkdir -p "$keep" && cp "$tmp/real.json" "$keep/"
  for ns in "${teams[@]}"; do
    k -n "$ns" get events --sort-by=.metadata.creationTimestamp \
      -o custom-columns=AT:.metadata.creationTimestamp,OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message
  done > "$keep/events.txt" 2>&1
  echo "    the run's figures and every event of the teams' namespaces: $keep" >&2
  return 1
}
verdicts
if quota_back; then
  pass "$what"
else
  # A returning team's jobs have waited about a minute in one full e2e run, not in the runs of
  # this test alone; what they waited for (above) is the lead to its cause.
  echo "  the returning teams waited past the bound (above); running the scenario once more" >&2
  run_scenario
  verdicts
  quota_back || fail "$what"
  pass "$what (on the second run)"
fi
