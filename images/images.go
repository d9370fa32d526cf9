// Package images describes the images the project builds without a Docker
// engine: what binary goes where, and the image config. The OCI builder
// (package oci) and the Dockerfile beside each image must agree with these
// specs; images_test.go checks both.
package images

import (
	"context"
	"os"
	"os/exec"
)

// Spec is one single-binary image.
type Spec struct {
	// Ref is the image reference pods use (with imagePullPolicy Never).
	Ref string
	// Dir is the image's directory under images/, holding its Dockerfile
	// and, unless Package says otherwise, its Go main package.
	Dir string
	// Package is the main package relative to the repository root, for
	// binaries that live elsewhere (the controller); empty means ./images/Dir.
	Package string
	// Base is the Dockerfile's base image; empty means scratch. The OCI
	// build lays down the files of the base that the binary relies on (see
	// package oci), since it cannot pull.
	Base string
	// Path is where the binary lives in the image.
	Path string
	// Links are further paths of the same binary (hard links in the OCI
	// build, so the image holds one copy).
	Links      []string
	Entrypoint []string
	User       string
	Env        []string
}

// BuildEnv and BuildFlags are how every binary the project ships is built
// (the OCI build, each Dockerfile, and the controller the e2e suites and the
// bench run): static, with no libc (the images have none), paths trimmed,
// no symbol table or debug information. A cgo build links libc and is a
// different binary: started against an API server, its resident pages were
// 44.0 MiB against 38.7 for the shipped one, so a bench or a test of it
// would not measure what runs in a cluster. TestDockerfilesBuildAsTheOCIBuild
// holds the Dockerfiles to them.
var (
	BuildEnv   = []string{"CGO_ENABLED=0"}
	BuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}
)

// GoBuild is the command that builds pkg of the module at dir into out
// with BuildEnv and BuildFlags; env is added to the environment (a target
// platform's GOOS and GOARCH).
func GoBuild(ctx context.Context, dir, out, pkg string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, BuildFlags...), "-o", out, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), BuildEnv...), env...)
	return cmd
}

// NonRoot is distroless' nonroot user, which the product images use.
const NonRoot = "65532:65532"

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// QuickExitPaths are the entrypoints of common sidecars: an image swap keeps
// the pod's command, so the quick-exit binary must answer at each of them.
// Documented in quick-exit/README.md; a test keeps the two in step.
var QuickExitPaths = []string{
	"/bin/sh", "/bin/bash", "/bin/ash", "/bin/sleep", "/usr/bin/env", "/usr/bin/sleep",
	"/usr/local/bin/envoy", "/usr/local/bin/pilot-agent", // istio-proxy
	"/usr/local/bin/linkerd2-proxy", "/usr/lib/linkerd/linkerd2-proxy", // linkerd-proxy
	"/fluent-bit/bin/fluent-bit", "/usr/bin/fluentd", "/usr/local/bin/fluentd", // log shippers
	"/usr/local/bin/vector", "/usr/bin/vector", "/bin/promtail", "/usr/bin/promtail",
	"/usr/local/bin/otelcol", "/otelcol", "/otelcol-contrib", "/usr/local/bin/otelcol-contrib", // OpenTelemetry collector
	"/cloud_sql_proxy", "/cloud-sql-proxy", // Cloud SQL proxy
	"/usr/bin/tini", "/sbin/tini", "/tini", "/usr/bin/dumb-init", // init wrappers
	"/entrypoint.sh", "/docker-entrypoint.sh", "/usr/local/bin/docker-entrypoint.sh",
}

// Pause is the pod sandbox image; its name is the one containerd is
// configured with, so nothing is ever pulled.
var Pause = Spec{
	Ref: "registry.k8s.io/pause:3.10", Dir: "pause", Path: "/pause",
	Entrypoint: []string{"/pause"}, User: "65535:65535",
}

// QuickExit is the image swapped into a sidecar to make it exit 0.
var QuickExit = Spec{
	Ref: "ghcr.io/sidecar-terminator/quick-exit:dev", Dir: "quick-exit", Path: "/quick-exit",
	Links: QuickExitPaths, Entrypoint: []string{"/quick-exit"}, User: NonRoot, Env: []string{defaultPath},
}

// Workload plays main containers and sidecars in the e2e suites.
var Workload = Spec{
	Ref: "ghcr.io/sidecar-terminator/workload:dev", Dir: "workload", Path: "/workload",
	Entrypoint: []string{"/workload"}, User: NonRoot, Env: []string{defaultPath},
}

// All are the images the e2e harness imports into the node.
var All = []Spec{Pause, QuickExit, Workload}
