#!/usr/bin/env bash
# e2e: a hostile tenant (kubectl --as=tenant, the `edit` ClusterRole in namespaces muster manages)
# replays seven defects muster had, each checked for the fixed behaviour, on 4 KWOK nodes of 8 cpu
# (scenarios/clusters/tenant-4x8.yaml). The test itself is Rust
# (crates/muster-harness/tests/tenant_replays.rs, which lists the replays); rust_e2e (hack/e2e/muster.sh)
# starts muster and, for the whole test, the over-commit checker (`muster-harness overcommit`),
# which checks every 0.5 s that no node has more requested by its bound pods than it has
# allocatable.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
rust_e2e tenant_replays "a hostile tenant: all seven replays hold" 50 \
  namespace/e2e-tenant-{1,2,3,4,5,6,7} namespace/e2e-tenant-foreign clusterrole/e2e-tenant-groups \
  queues.muster.dev/e2e-tenant-mem
