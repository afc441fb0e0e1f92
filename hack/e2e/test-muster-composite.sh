#!/usr/bin/env bash
# e2e: a CompositePodGroup of two PodGroups (Kubernetes 1.37, scheduling.k8s.io/v1alpha3) placed
# as one group of sets on 32 KWOK nodes of 8 GPUs in racks and blocks
# (scenarios/clusters/gpu-racks-32.yaml). The test itself is Rust
# (crates/muster-harness/tests/composite.rs); rust_e2e (hack/e2e/muster.sh) starts muster and,
# for the whole test, the over-commit checker (`muster-harness overcommit`), which checks every
# 0.5 s that no node has more requested by its bound pods than it has allocatable.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
rust_e2e composite "a CompositePodGroup is placed whole: each PodGroup in its rack, the tree in one block" 10 \
  namespace/e2e-composite
