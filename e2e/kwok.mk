# Jobs on kwok nodes through a real control plane (e2e/kwok), included by
# the root Makefile. Needs no root: kwok plays every kubelet.
KWOK_NODES ?= 1000
KWOK_JOBS ?= 10000
KWOK_FLAGS ?=

.PHONY: kwok-scale
kwok-scale: ## KWOK_JOBS Jobs (default 10,000) on KWOK_NODES kwok nodes (default 1,000) through the real scheduler and Job controller, with this controller, OpenKruise's SidecarTerminator and none (writes e2e/bench/results/kwok-KWOK_JOBS.{json,md}; about 40 minutes at the defaults).
	$(GO) run ./e2e/cmd/cluster build
	$(GO) run ./e2e/cmd/kwok -nodes $(KWOK_NODES) -jobs $(KWOK_JOBS) $(KWOK_FLAGS)
