#!/usr/bin/env bash
# e2e: gangs inside a JobSet's group (pod templates' muster.dev/set-topology and sub-group
# annotations), against the real JobSet controller, on 32 KWOK nodes of 8 GPUs in racks and
# blocks (scenarios/clusters/gpu-racks-32.yaml). The test itself is Rust
# (crates/muster-harness/tests/jobset_gangs.rs); the JobSet controller is started first, so that
# muster's first discovery finds its CRD, then rust_e2e (hack/e2e/muster.sh) starts muster and
# the over-commit checker around it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
tmp=$(mktemp -d)
cleanup() {
  local rc=$?
  jobset_controller_down $rc
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
jobset_controller_up "$tmp" "$MUSTER_CLUSTER_DIR/logs/jobset-controller.log"
rust_e2e jobset_gangs "a JobSet's replicated Jobs are gangs in their racks, within one block; sub-groups share a rack" 10 \
  namespace/e2e-jobset-gangs
