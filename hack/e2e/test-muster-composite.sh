#!/usr/bin/env bash
# e2e: a CompositePodGroup of two PodGroups (Kubernetes 1.37, scheduling.k8s.io/v1alpha3) placed
# as one group of sets on 32 KWOK nodes of 8 GPUs in racks and blocks
# (scenarios/clusters/gpu-racks-32.yaml). The test itself is Rust
# (crates/muster-harness/tests/composite.rs); this script starts muster and, for the whole test,
# hack/e2e/overcommit.py, which checks every 0.5 s that no node has more requested by its bound
# pods than it has allocatable.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
echo "test-muster-composite" >&2
tmp=$(mktemp -d)
checker_pid=""
cleanup() {
  stop_process "$checker_pid"
  muster_down
  k delete namespace e2e-composite --wait=false --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
overcommit_watch "$tmp"
muster_up
check "a CompositePodGroup is placed whole: each PodGroup in its rack, the tree in one block" \
  env MUSTER_E2E_KUBECONFIG="$KUBECONFIG" cargo test -q -p muster-harness --test composite
overcommit_verdict "$tmp" 10
