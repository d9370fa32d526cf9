# Local real cluster (e2e/cluster): included by the root Makefile.
# Needs root and containerd/runc/CNI plugins (e2e/hack/install-host-deps.sh).
CLUSTER_RUN_DIR ?= /tmp/sidecar-terminator-cluster

.PHONY: cluster-up cluster-down cluster-status demo e2e-local images

## cluster-up: build (cached) and start etcd, apiserver, KCM, scheduler, a real node and OpenKruise; prints the kubeconfig path
cluster-up:
	go run ./e2e/cmd/cluster up --run-dir $(CLUSTER_RUN_DIR) $(CLUSTER_UP_FLAGS)

## cluster-down: stop everything cluster-up started, by PID, and undo the host changes
cluster-down:
	go run ./e2e/cmd/cluster down --run-dir $(CLUSTER_RUN_DIR)

cluster-status:
	go run ./e2e/cmd/cluster status --run-dir $(CLUSTER_RUN_DIR)

## images: write the pause, quick-exit and workload image tarballs to bin/images (no Docker engine)
images:
	go run ./images/cmd/build-images -out bin/images

## demo: a Job with a sidecar on the real node, with and without the controller
demo:
	go run ./e2e/cmd/demo

## e2e-local: the e2e-framework suite against the real local cluster
e2e-local:
	go test ./e2e/realnode/ -count=1 -timeout 40m -v $(E2E_FLAGS)
