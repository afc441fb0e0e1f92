# --- control plane (hack/) ---
# A real Kubernetes control plane on loopback with KWOK nodes (docs/control-plane.md).
CLUSTER ?= scenarios/clusters/seed-deadlock.yaml

.PHONY: cluster-build cluster-up cluster-down e2e bench-cluster

cluster-build:  ## build etcd, kube-apiserver/-controller-manager/-scheduler, kubectl, kwok (cached)
	hack/cluster-build.sh

cluster-up: cluster-build  ## start the control plane with the nodes of $(CLUSTER); prints the kubeconfig
	hack/cluster-up.sh $(CLUSTER)

cluster-down:  ## stop every process cluster-up started
	hack/cluster-down.sh

e2e: cluster-build  ## control-plane e2e tests on a private cluster, stopped afterwards
	hack/e2e/run.sh

bench-cluster: cluster-build  ## 1000 pods created -> bound -> Succeeded with the default scheduler
	hack/bench-cluster.sh
# --- end control plane (hack/) ---
