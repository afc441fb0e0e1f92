#!/usr/bin/env bash
# e2e: gangs of real containers on real kubelets. Two real nodes join the cluster
# (hack/real-nodes.sh: a kubelet and a containerd each, 1500m CPU allocatable), then the Rust test
# crates/muster-harness/tests/real_nodes.rs runs under rust_e2e (hack/e2e/muster.sh): muster and the
# over-commit checker around it. Beyond muster's own count, the kubelets judge: a pod one refuses
# at admission fails the test. run.sh stops the real nodes after it (and cluster-down.sh does, if
# the run is cut short).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
t0=$(date +%s)
"$hack_dir/real-nodes.sh" up 2 || fail "two real nodes join the cluster (hack/real-nodes.sh up 2)"
pass "two real nodes Ready in $(( $(date +%s) - t0 ))s: $(k get nodes -l muster.dev/real-node=true -o jsonpath='{.items[*].status.nodeInfo.containerRuntimeVersion}')"
rust_e2e real_nodes "gangs of real containers run whole, and no kubelet refuses a pod muster bound" 20 \
  namespace/e2e-real-nodes
