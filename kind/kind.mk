# kind: the product on kind clusters (kind/README.md). Included by the root
# Makefile. K8S_MINOR picks kind/clusters/vK8S_MINOR.yaml. KIND_OFFLINE=1
# runs the same steps with no internet: Docker in a network namespace of its
# own (kind/hack/dockerd.sh), node images built here (kind/cmd/kindimage),
# OpenKruise from the pinned kruise module through a local registry.
K8S_MINOR    ?= 1.37
KIND_OFFLINE ?= 0
export KIND_OFFLINE
# Offline, the API server kind publishes is on the namespace's loopback: the
# clients run inside it.
KIND_RUN := $(if $(filter 1,$(KIND_OFFLINE)),kind/hack/dockerd.sh run,)

.PHONY: kind-deps kind-image kind-up kind-down e2e-kind kind-ci

kind-deps: ## Install what KIND_OFFLINE=1 needs: Debian's docker.io and debootstrap (no daemon started).
	kind/hack/install-deps.sh

kind-image: ## Build the offline node image for K8S_MINOR (cached by version; prints its name).
	kind/hack/dockerd.sh start
	eval "$$(kind/hack/dockerd.sh env)" && SIDECAR_TERMINATOR_KUBERNETES=$(K8S_MINOR) $(GO) run ./kind/cmd/kindimage

kind-up: ## kind cluster (K8S_MINOR=1.35|1.36|1.37) with OpenKruise, the chart and the mock virtual node (KIND_OFFLINE=1: no internet).
	KIND_KUBECONFIG=$(KIND_KUBECONFIG) kind/up.sh $(K8S_MINOR)

kind-down: ## Delete the kind cluster (KIND_OFFLINE=1: and stop the local registry and Docker engine, checking the host).
	kind/down.sh

e2e-kind: kind-up ## kind-up, then the shared cases on the real kind nodes and the mock virtual node.
	E2E_KUBECONFIG=$(KIND_KUBECONFIG) $(KIND_RUN) $(GO) test ./e2e/kubeconfig/ -count=1 -timeout 40m -v $(E2E_FLAGS)

kind-ci: ## What CI runs: install, offline e2e-kind at K8S_MINOR, then kind-down whatever happened.
	kind/hack/install-deps.sh
	rc=0; $(MAKE) e2e-kind KIND_OFFLINE=1 || rc=$$?; $(MAKE) kind-down KIND_OFFLINE=1 || rc=1; exit $$rc
