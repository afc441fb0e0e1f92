#!/usr/bin/env bash
# e2e: reclaim with victims slow to stop, on 4 KWOK nodes of 8 cpu (scenarios/clusters/tenant-4x8.yaml).
# The test itself is Rust (crates/muster-harness/tests/reclaim.rs: two teams in a cohort, one
# borrowing, the other reclaiming while the borrower's pods are held on their nodes by a
# finalizer); rust_e2e (hack/e2e/muster.sh) starts muster and, for the whole test, the
# over-commit checker (`muster-harness overcommit`), which checks every 0.5 s that no node has
# more requested by its bound pods than it has allocatable.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
rust_e2e reclaim "two teams: the reclaiming team is bound only once the borrower's pods are gone" 20
