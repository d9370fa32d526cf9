# Shipping: chart, kustomize base, workflows, kind. Included by the root
# Makefile. Tools (helm, kustomize, actionlint, crane) are pinned under
# hack/tools and built once into $SIDECAR_TERMINATOR_CACHE/tools by
# `go run ./hack/cmd/tool`.
TOOL      := go run ./hack/cmd/tool
CHART_DIR := controller/deploy/chart/sidecar-terminator

.PHONY: manifests lint-workflows chart-package

## manifests: regenerate the kustomize base (controller/deploy/base) from the Helm chart
manifests:
	go run ./controller/deploy/cmd/render-base

## lint-workflows: actionlint (built from its Go module) on .github/workflows
lint-workflows:
	$(TOOL) actionlint -color

## chart-package: package the Helm chart into bin/chart
chart-package:
	$(TOOL) helm package $(CHART_DIR) --destination $(BIN)/chart
