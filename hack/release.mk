# The release rehearsal. Included by the root Makefile.
# release-check: a registry on 127.0.0.1 (a free port), the release command
# (hack/cmd/release, what .github/workflows/release.yaml runs) with a cosign
# key made for the run, verification from the registry alone, a second build
# giving the same digests, then the local cluster pulling and running the
# release (e2e/release; root, like the other real-cluster suites).
.PHONY: release-check release-tools

release-tools: ## Build the release's tools (crane, cosign, syft, helm) from hack/tools, outside any test's timeout.
	$(GO) run ./hack/cmd/tool -path crane >/dev/null
	$(GO) run ./hack/cmd/tool -path cosign >/dev/null
	$(GO) run ./hack/cmd/tool -path syft >/dev/null
	$(GO) run ./hack/cmd/tool -path helm >/dev/null

release-check: release-tools ## Rehearse a release: push, sign, attest, verify, then the local cluster pulls and runs it (needs root).
	$(GO) run ./e2e/cmd/cluster build
	$(GO) test -count=1 -v -timeout 45m ./e2e/release/

# push: the install that works before any public release. Builds the
# controller, quick-exit and workload images and the kubectl plugin
# (linux/amd64 and arm64, reproducibly: images/oci) and the chart, its
# images pinned to what was pushed, and pushes them to REGISTRY. No SBOMs,
# no signatures, no key: that is the release's (release-check). Prints each
# reference with its digest. PUSH_VERSION defaults to the chart's version;
# PUSH_OUT holds the layouts, the packaged chart and release.json.
.PHONY: push
PUSH_OUT ?= bin/push
PUSH_VERSION ?= $(shell sed -n 's/^version: *//p' controller/deploy/chart/sidecar-terminator/Chart.yaml)

push: ## Build the images, kubectl plugin and chart from source and push them to REGISTRY=host[:port][/path] (PUSH_VERSION: the chart's version).
	@test -n "$(REGISTRY)" || { echo "make push: set REGISTRY=host[:port][/path], e.g. make push REGISTRY=registry.example.com/team" >&2; exit 2; }
	$(GO) run ./hack/cmd/release -registry $(REGISTRY) -chart-repo $(REGISTRY)/charts -version $(PUSH_VERSION) -sign none -out $(PUSH_OUT) -refs
