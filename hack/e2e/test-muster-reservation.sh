#!/usr/bin/env bash
# e2e: a calendar Reservation sets two of 4 KWOK nodes of 8 cpu aside for one queue over a short
# window (scenarios/clusters/reservation-4.yaml): backfill before it, only its queue inside it,
# others' work evicted whole at its opening, its status and `muster why`; a Reservation of an amount
# keeps its node when a Queue changes and the engine takes the new configuration. The test itself is Rust
# (crates/muster-harness/tests/reservation.rs); rust_e2e (hack/e2e/muster.sh) starts muster and,
# for the whole test, the over-commit checker, which checks every 0.5 s that no node has more
# requested by its bound pods than it has allocatable.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
rust_e2e reservation "a calendar Reservation keeps its pool for its queue over its window" 20 \
  namespace/e2e-resv-a namespace/e2e-resv-b reservations.muster.dev/e2e-training reservations.muster.dev/e2e-no-length reservations.muster.dev/e2e-amount \
  queues.muster.dev/e2e-resv-a queues.muster.dev/e2e-resv-b
