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
