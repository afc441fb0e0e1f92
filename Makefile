# muster: the targets CI and the README use. `make help` lists them.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: help test lint properties bench fuzz demo ref-sim bench-ref-sim

help:  ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## /  \1\t/'

test: lint  ## format check, clippy, and every test of the workspace
	$(CARGO) test --workspace

lint:  ## cargo fmt --check, clippy and the API docs (every intra-doc link resolves) with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

properties:  ## the engine's and the matcher's property tests at depth (3,000 and 20,000 cases; `make test` runs 48 and 192)
	PROPTEST_CASES=3000 $(CARGO) test -p muster-queue --test properties
	PROPTEST_CASES=20000 $(CARGO) test -p muster-graph --test properties

bench:  ## criterion benchmarks of the matcher, and its 50k-node memory figure (docs/benchmarks.md)
	$(CARGO) bench -p muster-graph --bench matcher
	$(CARGO) run --release -q -p muster-graph --example graph_memory

ref-sim:  ## muster's FCFS, best-effort, EASY, conservative and selective schedules against the Python reference simulator, job for job (hack/ref-sim/)
	hack/ref-sim/compare.sh

bench-ref-sim:  ## time each of muster's policies against the Python reference running the same one, in pairs (hack/ref-sim/bench.sh)
	hack/ref-sim/bench.sh

fuzz:  ## run every fuzz target for FUZZ_SECONDS each (needs a nightly toolchain and cargo-fuzz)
	fuzz/run.sh $(FUZZ_SECONDS)

demo:  ## a tour of the matcher on the shipped example cluster
	$(CARGO) run --release -q -p muster -- match scenarios/match/cluster.yaml --echo < scenarios/match/commands.txt

# --- container image (hack/image.sh, docs/deploy.md) ---
.PHONY: image image-test

image:  ## a container image archive of muster (docker-save format), built without a daemon (hack/image.sh)
	hack/image.sh

image-test:  ## build the image, then check it: non-root config, runs under chroot as 65532, under 40 MB
	hack/image-test.sh

# --- control plane (hack/) ---
# A real Kubernetes control plane on loopback with KWOK nodes (docs/control-plane.md).
CLUSTER ?= scenarios/clusters/seed-deadlock.yaml

.PHONY: cluster-build cluster-up cluster-down e2e peers faults bench-cluster bench-bind sim-vs-real

cluster-build:  ## build etcd, kube-apiserver/-controller-manager/-scheduler, kubectl, kwok (cached)
	hack/cluster-build.sh

cluster-up: cluster-build  ## start the control plane with the nodes of $(CLUSTER); prints the kubeconfig
	hack/cluster-up.sh $(CLUSTER)

cluster-down:  ## stop every process cluster-up started
	hack/cluster-down.sh

e2e: cluster-build  ## control-plane e2e tests on a private cluster, stopped afterwards (TESTS="NAME ...": only those)
	hack/e2e/run.sh $(TESTS)

peers: cluster-build  ## seed 001 under the real Kueue, coscheduling, Volcano and kube-scheduler's native gangs; Kueue's fair sharing on one case (docs/peers.md)
	hack/e2e/run.sh peer-kueue peer-kueue-fair peer-coscheduling peer-volcano peer-native

faults: cluster-build  ## two replicas on PostgreSQL under seed 002's load through six faults (MUSTER_FAULTS_ARGS="--jobs N ...")
	hack/e2e/run.sh muster-faults

bench-cluster: cluster-build  ## 1000 pods created -> bound -> Succeeded with the default scheduler
	hack/bench-cluster.sh

bench-bind: cluster-build  ## pods bound per second in a burst (SCHEDULER=default|muster|default,muster, SHAPE=pods|jobs|gang, COUNT)
	hack/bench-bind.sh --scheduler $(or $(SCHEDULER),default) --shape $(or $(SHAPE),pods) --count $(or $(COUNT),1000) $(BENCH_BIND_ARGS)

sim-vs-real: cluster-build  ## same scenarios on muster sim (default model) and the real control plane; fails beyond 10%
	hack/sim-vs-real.sh
# --- end control plane (hack/) ---
