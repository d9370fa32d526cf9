# Local real cluster (e2e/cluster), included by the root Makefile. Needs
# root and containerd, runc and the CNI plugins (e2e/hack/install-host-deps.sh).
CLUSTER_RUN_DIR ?= /tmp/sidecar-terminator-cluster

.PHONY: cluster-up cluster-down cluster-status demo e2e-local images

cluster-up: ## Start etcd, apiserver, KCM, scheduler, a real node and OpenKruise (binaries built once, cached); prints the kubeconfig path. CLUSTER_UP_FLAGS=--controller also runs the controller.
	$(GO) run ./e2e/cmd/cluster up --run-dir $(CLUSTER_RUN_DIR) $(CLUSTER_UP_FLAGS)

cluster-down: ## Stop everything cluster-up started, by PID, undo the host changes, fail if anything is left.
	$(GO) run ./e2e/cmd/cluster down --run-dir $(CLUSTER_RUN_DIR)

cluster-status: ## List the local cluster's processes and logs.
	$(GO) run ./e2e/cmd/cluster status --run-dir $(CLUSTER_RUN_DIR)

images: ## Write the pause, quick-exit and workload image tarballs to bin/images (no Docker engine).
	$(GO) run ./images/cmd/build-images -out $(BIN)/images

demo: ## The same Job on the real node (CRR through kruise-daemon) and on a mock virtual node (image swap), then without the controller; then tear down.
	$(GO) run ./e2e/cmd/demo

e2e-local: ## The e2e-framework suite against the real local cluster (E2E_LOGS_DIR=dir keeps logs).
	$(GO) test ./e2e/realnode/ -count=1 -timeout 40m -v $(E2E_FLAGS)

.PHONY: e2e-versions
E2E_VERSIONS ?= 1.35 1.36 1.37
e2e-versions: ## The real-node suite on each supported Kubernetes (E2E_VERSIONS, default 1.35 1.36 1.37): the release checklist and CI's matrix, not every make test.
	@for v in $(E2E_VERSIONS); do \
	  echo "== Kubernetes $$v"; \
	  SIDECAR_TERMINATOR_KUBERNETES=$$v $(GO) run ./e2e/cmd/cluster build || exit 1; \
	  SIDECAR_TERMINATOR_KUBERNETES=$$v $(GO) test -count=1 -timeout 40m -v ./e2e/realnode/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|harness: (node|kubelet)|SKIPPED' ; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done
