# OpenKruise's own SidecarTerminator e2e tests against this controller
# (e2e/kruisesuite/README.md), included by the root Makefile. Needs root, as
# the local real cluster does, and apt's package lists (apt-get update).
# KRUISE_E2E_TERMINATOR: sidecar-terminator (default), openkruise (the
# calibration: OpenKruise's own terminator) or none (the suite must fail).
KRUISE_E2E_TERMINATOR ?= sidecar-terminator

.PHONY: kruise-e2e

kruise-e2e: ## OpenKruise's own SidecarTerminator e2e tests (its test/e2e at the pinned version, 7 workloads) on the local real cluster, sidecars stopped by this controller; KRUISE_E2E_TERMINATOR=openkruise runs them against OpenKruise's own.
	$(GO) run ./e2e/cmd/cluster build
	KRUISE_E2E_TERMINATOR=$(KRUISE_E2E_TERMINATOR) $(GO) test ./e2e/kruisesuite/ -count=1 -timeout 45m -v
