#!/usr/bin/env bash
# muster under faults (a benchmark: `make faults`; figures in docs/benchmarks.md). Two controller
# replicas on PostgreSQL and one webhook process (as the chart's pods split them), under seed
# 002's load at a shorter time scale (hack/e2e/test-scale.sh), while, one after the other:
#   the leader is SIGKILLed (restarted as a standby), then the new leader too;
#   once every Job is created: kube-apiserver is restarted; etcd is restarted (down 5 s);
#   PostgreSQL is stopped for 30 s; the webhook is down for 30 s (a queued Job created meanwhile
#   must be refused, not slip past the queue).
# Checked: every Job completes and none fails; no node is over-committed at any poll
# (overcommit.py, apart from muster's code); no allocation is left in the store; no group is
# admitted again while it holds its placement (the store's history; requeues after an eviction
# are reported with their reasons). Measured: for each fault, the time from it to the first
# admission after it (in a later second: the store keeps seconds). Prints one JSON line (also
# appended to --out).
#
#   hack/e2e/test-muster-faults.sh [--jobs N] [--run-seconds R] [--jitter-seconds J]
#                                  [--gap SECONDS] [--out FILE]
#
# Needs the nodes of scenarios/clusters/seed-scalability.yaml and PostgreSQL's server binaries.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
jobs=1000 run=60 jitter=30 gap=20 out=""
while (( $# )); do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --run-seconds) run=$2; shift 2 ;;
    --jitter-seconds) jitter=$2; shift 2 ;;
    --gap) gap=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) die "unknown argument: $1" ;;
  esac
done
ns=e2e-muster-faults
late=e2e-muster-faults-late  # test-scale.sh deletes its namespace when the load ends
echo "test-muster-faults ($jobs jobs, run ${run}+0..${jitter} s, ${gap} s between faults)" >&2
logs=$MUSTER_CLUSTER_DIR/logs
dir=$MUSTER_CLUSTER_DIR/faults
rm -rf "$dir"; mkdir -p "$dir" "$muster_dir"
. "$MUSTER_CLUSTER_DIR/ports.env"

# --- PostgreSQL, throwaway, on loopback (as user postgres when run as root) ---
pg_bin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)")
[[ -x $pg_bin/pg_ctl ]] || die "PostgreSQL server binaries not found (apt-get install postgresql)"
pgdata=$(mktemp -d /tmp/muster-faults-pg.XXXXXX)
as_pg=()
if (( EUID == 0 )); then chown postgres "$pgdata"; as_pg=(runuser -u postgres --); fi
pg_port=$(free_port)
pg_start() {
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pgdata/data" -l "$pgdata/log" -w \
    -o "-p $pg_port -k $pgdata -c listen_addresses=127.0.0.1" start >/dev/null
}
pg_stop() { "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pgdata/data" -m fast -w stop >/dev/null; }
sql() { psql -h 127.0.0.1 -p "$pg_port" -U muster -d muster -tAc "$1"; }
"${as_pg[@]}" "$pg_bin/initdb" -D "$pgdata/data" -A trust -U muster >/dev/null
pg_start
"$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U muster muster
store=postgres://muster@127.0.0.1:$pg_port/muster

pids=()
cleanup() {
  local p
  for p in "${pids[@]}" $(cat "$dir"/*.loop "$dir"/*.pid 2>/dev/null); do kill -TERM "$p" 2>/dev/null || true; done
  k delete mutatingwebhookconfiguration,validatingwebhookconfiguration muster --ignore-not-found >/dev/null 2>&1 || true
  k delete namespace $late --wait=false --ignore-not-found >/dev/null 2>&1 || true
  pg_stop 2>/dev/null || true
  rm -rf "$pgdata"
}
trap cleanup EXIT

# --- muster: one webhook process, two controller replicas ---
wport=$(free_port)
"$MUSTER_BIN" install --out "$muster_dir" --webhook-url "https://127.0.0.1:$wport" >/dev/null
printf 'apiVersion: muster.dev/v1alpha1\nkind: Queue\nmetadata: {name: default}\nspec: {}\n' | k apply -f - >/dev/null
webhook_start() {
  "$MUSTER_BIN" webhook --addr "127.0.0.1:$wport" --tls-cert "$muster_dir/tls.crt" --tls-key "$muster_dir/tls.key" \
    --kubeconfig "$muster_dir/controller.kubeconfig" >>"$logs/faults-webhook.log" 2>&1 &
  echo $! >"$dir/webhook.pid"
  disown
  local i
  for i in $(seq 1 100); do curl -sk --max-time 1 "https://127.0.0.1:$wport/healthz" >/dev/null && return 0; sleep 0.1; done
  fail "the webhook did not come up"
}
replica_start() { # replica_start NAME: restarted whenever it exits, as a pod's container would be
  (
    while :; do
      "$MUSTER_BIN" controller --kubeconfig "$muster_dir/controller.kubeconfig" --store "$store" --identity "$1" \
        --lease-seconds 6 --metrics-addr "127.0.0.1:$(free_port)" >>"$logs/faults-$1.log" 2>&1 &
      echo $! >"$dir/$1.pid"
      wait $! || true
      echo "restarted" >>"$dir/$1.restarts"
      sleep 1
    done
  ) &
  echo $! >"$dir/$1.loop"
  disown
}
leader() { k -n muster-system get lease muster-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
fresh_namespace $late
webhook_start
replica_start replica-a
sleep 2
replica_start replica-b
eventually 60 "a replica leads" bash -c "[[ -n \$('$K8S_BIN/kubectl' -n muster-system get lease muster-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) ]]"

python3 "$(dirname "$0")/overcommit.py" --kubeconfig "$KUBECONFIG" --kubectl "$K8S_BIN/kubectl" \
  --state "$dir/overcommit.json" --log "$logs/faults-overcommit.log" &
pids+=($!)
"$(dirname "$0")/test-scale.sh" --scheduler muster --namespace $ns --jobs "$jobs" --run-seconds "$run" \
  --jitter-seconds "$jitter" --deadline-seconds $(( 10 * (run + jitter) )) --timeout 1800 >"$dir/scale.out" &
scale_pid=$!
pids+=($scale_pid)

# --- the faults, one after the other ---
faults=()
fault() { faults+=("$(date +%s)|$1"); pass "fault: $1"; }
kill_leader() { # kill_leader WHAT: SIGKILL the leading replica (it comes back as a standby)
  local l; l=$(leader)
  [[ -f $dir/$l.pid ]] || fail "no replica named '$l' leads"
  kill -KILL "$(cat "$dir/$l.pid")"
  fault "$1 ($l) SIGKILLed"
}
sleep 15
kill_leader "the leader"
sleep $(( gap + 30 ))   # the store lease of a killed leader lasts 30 s
kill_leader "the new leader"
sleep $(( gap + 30 ))
created() { [[ $(k -n $ns get jobs --no-headers 2>/dev/null | wc -l) -ge $jobs ]]; }
eventually 600 "every Job is created ($jobs)" created
fault "kube-apiserver restarted"
restart_component kube-apiserver 0
until curl -fsSk "https://127.0.0.1:$MUSTER_PORT_APISERVER/readyz" >/dev/null 2>&1; do sleep 0.2; done
sleep "$gap"
fault "etcd restarted (down 5 s)"
restart_component etcd 5
until curl -fsS "http://127.0.0.1:$MUSTER_PORT_ETCD/health" >/dev/null 2>&1; do sleep 0.2; done
sleep "$gap"
fault "PostgreSQL stopped for 30 s"
pg_stop
sleep 30
pg_start
sleep "$gap"
fault "the webhook down for 30 s"
kill -TERM "$(cat "$dir/webhook.pid")"
sleep 1
refused "a queued Job created while the webhook is down" "failed calling webhook" \
  k -n $late create -f - < <(queued_job_yaml sneaked 1)
sleep 29
webhook_start

wait $scale_pid || { tail -n 20 "$dir/scale.out" >&2; fail "the load did not finish"; }
line=$(tail -n 1 "$dir/scale.out")
echo "$line" >&2
kill -TERM "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
ok() { python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if $1 else 1)" "$line"; }
check "every Job completed" ok "r['completed'] == r['jobs'] == $jobs"
check "no Job failed" ok "r['failed'] == 0"
violations=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["violations"])' "$dir/overcommit.json")
check "no node was over-committed at any poll ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["polls"])' "$dir/overcommit.json") polls)" test "$violations" = 0
eventually 30 "no allocation is left behind in the store" test "$(sql 'select count(*) from allocations')" = 0
# Admitted twice = admitted again while still holding the first placement (two leaders, a lost
# write). A group evicted (released) and admitted again later is a requeue, counted apart.
sql "select group_key, to_state, reason from history order by group_key, id" | python3 -c '
import collections, sys
holding, twice, requeues = {}, [], collections.Counter()
for row in sys.stdin.read().splitlines():
    key, to, reason = row.split("|", 2)
    if to == "Admitted":
        if holding.get(key):
            twice.append(key)
        holding[key] = True
    elif to in ("Evicted", "Succeeded", "Failed", "Deleted", "Suspended", "Deactivated", "Queued"):
        if to == "Evicted":
            requeues[reason] += 1
        holding[key] = False
print(len(twice), " ".join(twice[:5]), file=open(sys.argv[1], "w"))
print(", ".join(f"{n} after {r}" for r, n in requeues.items()) or "none", file=open(sys.argv[2], "w"))
' "$dir/twice" "$dir/requeues"
check "no group was admitted again while it held its placement ($(sql "select count(distinct group_key) from history where to_state = 'Admitted'") admitted)" \
  test "$(cut -d' ' -f1 "$dir/twice")" = 0
pass "requeues (released, then admitted again): $(cat "$dir/requeues")"
# Each fault with the first admission in a later second (0: none).
rows=()
for f in "${faults[@]}"; do
  rows+=("$f|$(sql "select coalesce(min(at), 0) from history where to_state = 'Admitted' and at > ${f%%|*}")")
done
for r in "${rows[@]}"; do
  IFS='|' read -r at what first <<<"$r"
  if (( first )); then pass "$what: first admission $(( first - at )) s later"; else pass "$what: no admission after it (nothing waited)"; fi
done
report=$(printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
line = json.loads(sys.argv[1])
faults = []
for row in sys.stdin.read().split("\n"):
    if row:
        at, what, first = row.split("|")
        after = int(first) - int(at) if int(first) else None
        faults.append({"fault": what, "at": int(at), "firstAdmissionAfterSeconds": after})
line["faults"] = faults
print(json.dumps(line))' "$line")
echo "$report"
if [[ -n $out ]]; then echo "$report" >>"$out"; fi
