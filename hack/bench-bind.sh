#!/usr/bin/env bash
# make bench-bind: how many pods per second a scheduler binds in a burst, on the real control plane.
#
#   hack/bench-bind.sh [--scheduler default|muster|default,muster] [--shape pods|jobs|gang]
#                      [--count N] [--submitters S] [--release uncordon|create] [--existing]
#                      [--out FILE]
#
# A burst of N pods (default 1000) of 2 cpu / 2Gi that run until deleted, created as fast as S
# submitters (default 10) can:
#   pods  N bare pods (with muster: one plain-pod group of N, labels muster.dev/group{,-size})
#   jobs  N Jobs of one pod each
#   gang  one Job of N pods (its pods come as fast as the Job controller creates them)
# --release uncordon (default) cordons the worker nodes while the burst is created and starts the
# clock when it uncordons them, so what is timed is the scheduler placing N waiting pods;
# --release create starts it at the first create request (then creation usually sets the pace).
# For each scheduler in turn (in a fresh namespace, emptied before the next) it follows every pod
# by a watch and prints one JSON line: podsBoundPerSecond (N over the time from the start to the
# last bind), ...BetweenFirstAndLast, ...Best10s, and each pod's wait to be bound (waitToBind).
# With two schedulers it then prints the ratio of the second to the first.
#
# By default it starts a private cluster in $MUSTER_BENCH_DIR (default
# ~/.cache/muster/bench-bind-cluster) with the nodes of scenarios/clusters/seed-scalability.yaml,
# and for muster installs and starts a release build of it (hack/e2e/muster.sh), and stops both
# afterwards. --existing uses the cluster of $KUBECONFIG instead; the muster path then needs
# muster's webhook and controller running there and a Queue named "default".
set -euo pipefail
. "$(dirname "$0")/lib.sh"
schedulers=default shape=pods count=1000 submitters=10 existing=0 out="" release=uncordon
while (( $# )); do
  case $1 in
    --scheduler) schedulers=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --submitters) submitters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --release) release=$2; shift 2 ;;
    --existing) existing=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[[ $shape =~ ^(pods|jobs|gang)$ ]] || die "--shape must be pods, jobs or gang"
[[ $count =~ ^[1-9][0-9]*$ ]] || die "--count must be a positive integer"
[[ $release =~ ^(uncordon|create)$ ]] || die "--release must be uncordon or create"
IFS=, read -r -a list <<<"$schedulers"
for s in "${list[@]}"; do [[ $s == default || $s == muster ]] || die "unknown scheduler: $s"; done
resolve_harness_bin release
k() { "$K8S_BIN/kubectl" "$@"; }

if (( existing )); then
  [[ -n ${KUBECONFIG:-} ]] || die "--existing needs KUBECONFIG"
else
  export MUSTER_CLUSTER_DIR=${MUSTER_BENCH_DIR:-$MUSTER_CACHE/bench-bind-cluster}
  export KUBECONFIG=$MUSTER_CLUSTER_DIR/kubeconfig
  "$hack_dir/cluster-build.sh"
  if [[ -z ${MUSTER_BIN:-} ]]; then
    (cd "$repo_dir" && cargo build -q --release -p muster) || die "cargo build --release -p muster failed"
    MUSTER_BIN=$(cd "$repo_dir" && cargo metadata --no-deps --format-version 1 |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/muster
    export MUSTER_BIN
  fi
  stop() {
    [[ $(type -t muster_down) == function ]] && muster_down
    "$hack_dir/cluster-down.sh"
  }
  trap stop EXIT
  trap 'exit 130' INT TERM
  "$hack_dir/cluster-up.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml" >/dev/null
  if [[ " ${list[*]} " == *" muster "* ]]; then
    . "$hack_dir/e2e/lib.sh"
    . "$hack_dir/e2e/muster.sh"
    # Measured as deployed: no decision log beside the bindings.
    MUSTER_E2E_LOG=${MUSTER_E2E_LOG:-info,kube=warn} muster_up
  fi
fi

figures=()
for s in "${list[@]}"; do
  ns=bench-bind-$s
  if [[ $s == muster ]]; then
    k get queues.muster.dev default >/dev/null 2>&1 || die "no Queue named default: is muster installed?"
  fi
  k delete namespace "$ns" --ignore-not-found --wait=true --timeout=300s >/dev/null
  k create namespace "$ns" >/dev/null
  until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
  log "$s: $count pods as $shape, $submitters submitters, timed from $release"
  line=$("$MUSTER_HARNESS_BIN" bind --kubeconfig "$KUBECONFIG" --namespace "$ns" --scheduler "$s" \
    --shape "$shape" --count "$count" --submitters "$submitters" --release "$release" ${out:+--out "$out"}) || true
  [[ -n $line ]] || die "$s: no figures"
  echo "$line"
  figures+=("$line")
  # Free the nodes before the next scheduler's burst.
  k delete namespace "$ns" --wait=true --timeout=300s >/dev/null
done

python3 - "${figures[@]}" <<'EOF'
import json, sys
rs = [json.loads(a) for a in sys.argv[1:]]
for r in rs:
    start = "the uncordon" if r["release"] == "uncordon" else "the first create"
    print(f"{r['scheduler']:8} {r['shape']:5} {r['podsBound']:6}/{r['count']} pods bound: "
          f"{r.get('podsBoundPerSecond')} /s from {start}, "
          f"{r.get('podsBoundPerSecondBetweenFirstAndLast')} /s between first and last bind, "
          f"best 10 s {r.get('podsBoundPerSecondBest10s')} /s; wait to bind {r.get('waitToBindSeconds')}",
          file=sys.stderr)
if len(rs) == 2 and rs[0].get("podsBoundPerSecond"):
    print(f"ratio {rs[1]['scheduler']}/{rs[0]['scheduler']}: "
          f"{rs[1].get('podsBoundPerSecond', 0) / rs[0]['podsBoundPerSecond']:.2f}", file=sys.stderr)
if any(r.get("timedOut") or r.get("overcommittedNodes") for r in rs):
    sys.exit(1)
EOF
