#!/usr/bin/env bash
# Stop the harness control plane started by hack/cluster-up.sh: each process by the pid
# it recorded (SIGTERM, then SIGKILL after a grace period), in reverse start order.
# Idempotent: does nothing when nothing runs. Keeps the logs; removes pids and etcd data.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dir=$MUSTER_CLUSTER_DIR
run=$dir/run
[[ -d $run ]] || { log "no cluster state in $dir; nothing to stop"; exit 0; }

# Real nodes first (hack/real-nodes.sh), while the apiserver can still be told they are gone.
[[ -d $dir/real-nodes ]] && "$hack_dir/real-nodes.sh" down

# Reverse start order: clients before the apiserver, the apiserver before etcd.
order=(muster-gang-ready kwok kube-scheduler kube-controller-manager kube-apiserver etcd)

# ours NAME PID: the pid still runs the binary we started (pids get reused).
ours() { [[ -d /proc/$2 ]] && grep -qF "$(cat "$run/$1.bin" 2>/dev/null)" "/proc/$2/cmdline" 2>/dev/null; }

stopped=0
for name in "${order[@]}"; do
  f=$run/$name.pid
  [[ -f $f ]] || continue
  read -r pid < "$f" || continue
  if [[ -n $pid ]] && ours "$name" "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do ours "$name" "$pid" || break; sleep 0.1; done
    if ours "$name" "$pid"; then
      log "$name (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    stopped=$((stopped + 1))
  fi
  rm -f "$f"
done
rm -rf "$run" "$dir/etcd-data"
log "stopped $stopped processes; logs kept in $dir/logs"
