# The deterministic simulator (sim/). Included by the root Makefile.
SIM_SOAK_PODS ?= 1000000
SIM_SOAK_SEED ?= 1
SIM_ARGS      ?=

.PHONY: sim sim-soak sim-bench

sim: ## Run every simulator scenario (seed 1) and print the results table; SIM_ARGS adds flags (--seeds N, --pods N, --scenario X).
	$(GO) run ./sim/cmd/sim $(SIM_ARGS)

sim-soak: ## Sweep seeds over random-fault scenarios until SIM_SOAK_PODS pods ran; fails on any violation.
	$(GO) run ./sim/cmd/sim --soak-pods $(SIM_SOAK_PODS) --seed $(SIM_SOAK_SEED)

sim-bench: ## 100,000 pods in one scenario, as a Go benchmark (wall time per run).
	$(GO) test -run '^$$' -bench BenchmarkScenario100kPods -benchtime 1x -timeout 30m ./sim/
