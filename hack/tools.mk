# Shipping: chart, kustomize base, workflows, kind. Included by the root
# Makefile. Tools (helm, kustomize, actionlint, crane, kind) are pinned under
# hack/tools and built once into $SIDECAR_TERMINATOR_CACHE/tools by
# `go run ./hack/cmd/tool`.
TOOL      := $(GO) run ./hack/cmd/tool
CHART_DIR := controller/deploy/chart/sidecar-terminator
# e2e environment: local (the real local cluster, needs root), kind (kind/up.sh
# then the suite: kind/kind.mk), kubeconfig (any cluster with the product
# installed: E2E_KUBECONFIG=path).
E2E_ENV   ?= local
KIND_KUBECONFIG ?= $(CURDIR)/$(BIN)/kind/sidecar-terminator.kubeconfig

.PHONY: manifests lint-workflows chart-package e2e

manifests: ## Regenerate the kustomize base (controller/deploy/base) from the Helm chart.
	$(GO) run ./controller/deploy/cmd/render-base

lint-workflows: ## actionlint (built from its Go module) on .github/workflows.
	$(TOOL) actionlint

chart-package: ## Package the Helm chart into bin/chart.
	$(TOOL) helm package $(CHART_DIR) --destination $(BIN)/chart

e2e: ## The shared e2e cases: E2E_ENV=local (default), kind or kubeconfig (E2E_KUBECONFIG=path; E2E_NODE_KIND=normal|virtual|all).
ifeq ($(E2E_ENV),local)
	$(MAKE) e2e-local
else ifeq ($(E2E_ENV),kind)
	$(MAKE) e2e-kind
else ifeq ($(E2E_ENV),kubeconfig)
	@test -n "$(E2E_KUBECONFIG)" || { echo "E2E_ENV=kubeconfig needs E2E_KUBECONFIG=path"; exit 2; }
	E2E_KUBECONFIG=$(E2E_KUBECONFIG) $(GO) test ./e2e/kubeconfig/ -count=1 -timeout 40m -v $(E2E_FLAGS)
else
	@echo "E2E_ENV must be local, kind or kubeconfig, not $(E2E_ENV)"; exit 2
endif
