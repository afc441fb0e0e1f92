#!/usr/bin/env bash
# e2e: Cohorts with quotas of their own on 4 KWOK nodes of 8 cpu (scenarios/clusters/reservation-4.yaml):
# a department's borrowing limit caps what its queue takes from the rest of the tree, a change to
# it is read at once, and a Cohort the engine refuses takes its queue out. The test itself is Rust
# (crates/muster-harness/tests/cohort.rs); rust_e2e (hack/e2e/muster.sh) starts muster and, for the
# whole test, the over-commit checker.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
rust_e2e cohort "a cohort caps what its queues borrow from the rest of the tree" 20 \
  namespace/e2e-cohort-a namespace/e2e-cohort-b namespace/e2e-cohort-c cohorts.muster.dev/e2e-research \
  cohorts.muster.dev/e2e-org cohorts.muster.dev/e2e-bad queues.muster.dev/e2e-cohort-a \
  queues.muster.dev/e2e-cohort-b queues.muster.dev/e2e-cohort-c
