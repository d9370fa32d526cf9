// Package toolbin builds the developer tools pinned under hack/tools (one Go
// module per tool: helm, kustomize, actionlint, crane, kind, gremlins,
// cosign, syft) from their Go modules and caches the binaries outside
// the repository, keyed by version: the first test or make target pays the
// build, every later one gets the path at once. The tools' dependencies stay
// in hack/tools, out of the product's go.mod.
package toolbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/hack/filelock"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

// Packages maps a tool's name, which is also its module's directory under
// hack/tools, to its main package.
var Packages = map[string]string{
	"helm":       "helm.sh/helm/v3/cmd/helm",
	"kustomize":  "sigs.k8s.io/kustomize/kustomize/v5",
	"actionlint": "github.com/rhysd/actionlint/cmd/actionlint",
	"crane":      "github.com/google/go-containerregistry/cmd/crane",
	"kind":       "sigs.k8s.io/kind",
	"gremlins":   "github.com/go-gremlins/gremlins/cmd/gremlins",
	"cosign":     "github.com/sigstore/cosign/v3/cmd/cosign",
	"syft":       "github.com/anchore/syft/cmd/syft",
}

// CacheDir is where the tools are cached: $SIDECAR_TERMINATOR_CACHE/tools,
// the same root e2e/cluster caches its binaries under.
func CacheDir() (string, error) {
	if d := os.Getenv("SIDECAR_TERMINATOR_CACHE"); d != "" {
		return filepath.Join(d, "tools"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "sidecar-terminator", "tools"), nil
}

// Path returns the binary of the named tool at its pinned version, building
// it first when the cache lacks it.
func Path(ctx context.Context, name string) (string, error) {
	pkg, ok := Packages[name]
	if !ok {
		return "", fmt.Errorf("unknown tool %q", name)
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	toolsDir := filepath.Join(root, "hack", "tools", name)
	version, err := goCmd(ctx, toolsDir, "list", "-f", "{{.Module.Version}}", pkg)
	if err != nil {
		return "", fmt.Errorf("version of %s: %w", name, err)
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, name+"-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	err = filelock.With(ctx, bin+".lock", func() error {
		if _, err := os.Stat(bin); err == nil {
			return nil // built by whoever held the lock before us
		}
		tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
		defer os.Remove(tmp)
		ldflags, err := ldflagsFor(ctx, toolsDir, name, version)
		if err != nil {
			return err
		}
		if _, err := goCmd(ctx, toolsDir, "build", "-trimpath", "-ldflags", ldflags, "-o", tmp, pkg); err != nil {
			return fmt.Errorf("build %s %s: %w", name, version, err)
		}
		// Rename last, so a reader never runs a half-written binary.
		return os.Rename(tmp, bin)
	})
	if err != nil {
		return "", err
	}
	return bin, nil
}

// ldflagsFor sets what the tools' own release builds set by -X. For helm
// that includes the Kubernetes version it assumes when it has no cluster
// (helm template, helm lint): without it helm assumes v1.20 and rejects the
// chart's kubeVersion constraint.
func ldflagsFor(ctx context.Context, toolsDir, name, version string) (string, error) {
	switch name {
	case "helm":
		kv, err := goCmd(ctx, toolsDir, "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go")
		if err != nil {
			return "", err
		}
		// k8s.io/client-go v0.35.4 is Kubernetes 1.35.
		parts := strings.Split(strings.TrimPrefix(kv, "v"), ".")
		if len(parts) < 2 {
			return "", fmt.Errorf("unexpected client-go version %q", kv)
		}
		major, minor := "1", parts[1]
		flags := []string{"-s", "-w", "-X", "helm.sh/helm/v3/internal/version.version=" + version}
		for _, p := range []string{"helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"} {
			flags = append(flags, "-X", p+".k8sVersionMajor="+major, "-X", p+".k8sVersionMinor="+minor)
		}
		return strings.Join(flags, " "), nil
	case "cosign":
		// What `cosign version` prints (sigs.k8s.io/release-utils/version).
		return "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=" + version, nil
	case "syft":
		// syft's main package reads its version from a -X'd variable.
		return "-s -w -X main.version=" + version, nil
	case "actionlint":
		return "-s -w -X github.com/rhysd/actionlint.version=" + version, nil
	}
	return "-s -w", nil
}

func goCmd(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// The tool's module is built exactly as pinned: no workspace, and the
	// default -mod=readonly fails rather than edit its go.mod or go.sum.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	// Only stdout is the answer: on a machine whose module cache is empty, go
	// writes "go: downloading ..." lines to stderr, and those must never
	// become part of a version, a cache path or a linker flag.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
