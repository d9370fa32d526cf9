package images

// DistrolessStatic is the controller's base in its Dockerfile: distroless
// static, nonroot variant, pinned by digest (the tag's multi-arch index as
// of 2026-08; Dependabot proposes updates, .github/dependabot.yml). The OCI
// build reproduces the parts the binary relies on (package oci) rather than
// pulling it, so `make images` and the release never fetch it.
const DistrolessStatic = "gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab"

// Controller is the sidecar-terminator controller.
var Controller = Spec{
	Ref: "ghcr.io/sidecar-terminator/controller:dev", Dir: "controller", Package: "./controller/cmd/sidecar-terminator",
	Base: DistrolessStatic, Path: "/sidecar-terminator",
	Entrypoint: []string{"/sidecar-terminator"}, User: NonRoot, Env: []string{defaultPath},
}

// MockNode is the virtual-kubelet mock node the kind suites deploy.
var MockNode = Spec{
	Ref: "ghcr.io/sidecar-terminator/mock-node:dev", Dir: "mock-node", Package: "./e2e/virtualnode/cmd/mock-node",
	Base: DistrolessStatic, Path: "/mock-node",
	Entrypoint: []string{"/mock-node"}, User: NonRoot, Env: []string{defaultPath},
}

// Release are the images `make images` builds for every platform in
// Platforms and a release pushes.
var Release = []Spec{Controller, QuickExit, MockNode}

// Platforms are the architectures of the release images (linux only).
var Platforms = []string{"amd64", "arm64"}

// KubectlPlugin is the kubectl plugin `kubectl sidecar-terminator`,
// released as an image whose only file is the static binary (for each
// platform in Platforms): `crane export` of it is a tar holding
// kubectl-sidecar_terminator. No Dockerfile: nothing runs it as a container.
var KubectlPlugin = Spec{
	Ref: "ghcr.io/sidecar-terminator/kubectl-sidecar_terminator:dev", Dir: "kubectl-sidecar_terminator",
	Package: "./controller/cmd/kubectl-sidecar_terminator", Path: "/kubectl-sidecar_terminator",
	Entrypoint: []string{"/kubectl-sidecar_terminator"}, User: NonRoot,
}
