package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Versions of everything the harness builds. The staging modules of
// Kubernetes v1.N.P are published as v0.N.P.
const (
	EtcdVersion   = "v3.6.16"
	KruiseVersion = "v1.9.1"
)

// The Kubernetes the local cluster runs: the newest supported release by
// default; SIDECAR_TERMINATOR_KUBERNETES picks another supported minor
// ("1.35", "1.36", "1.37", or the full "v1.36.3"). Each is a patch release
// the Go module proxy serves; the real-node suite runs on each of them
// (make e2e-versions).
var (
	KubernetesVersion = kubernetesVersion(os.Getenv(KubernetesVersionEnv))
	StagingVersion    = "v0" + strings.TrimPrefix(KubernetesVersion, "v1")
)

// KubernetesVersionEnv names the environment variable that picks the
// local cluster's Kubernetes.
const KubernetesVersionEnv = "SIDECAR_TERMINATOR_KUBERNETES"

// SupportedKubernetes maps each minor upstream supports to the patch release
// the harness builds, oldest first; the last is the default.
var SupportedKubernetes = []string{"v1.35.4", "v1.36.3", "v1.37.2"}

// kubernetesVersion resolves the variable's value: empty is the newest
// supported release; a minor ("1.36" or "v1.36") is its pinned patch; a full
// version is taken as it is. Anything else panics: a harness built for the
// wrong Kubernetes is worse than one that does not start.
func kubernetesVersion(v string) string {
	if v == "" {
		return SupportedKubernetes[len(SupportedKubernetes)-1]
	}
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	for _, s := range SupportedKubernetes {
		if s == v || strings.HasPrefix(s, v+".") {
			return s
		}
	}
	if strings.Count(v, ".") == 2 && strings.HasPrefix(v, "v1.") {
		return v
	}
	panic(fmt.Sprintf("%s=%q: want one of %v, a minor of them, or a full v1.N.P", KubernetesVersionEnv, v, SupportedKubernetes))
}

// Kubernetes component names, as both the binary file name and the cmd dir.
const (
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubelet               = "kubelet"
	KubeProxy             = "kube-proxy"
	// Kubectl is not run by the cluster: it is there for the commands the
	// chart's NOTES and the README give users (e2e/chart runs them).
	Kubectl = "kubectl"
)

// Etcd is etcd's binary and process name (EtcdBinary builds it).
const Etcd = "etcd"

// AllKubernetesBinaries is every component the local cluster runs. A
// build of any missing one builds all the missing ones in one `go build`,
// so they share one module graph and one compilation of their common
// packages.
var AllKubernetesBinaries = []string{KubeAPIServer, KubeControllerManager, KubeScheduler, Kubelet, KubeProxy, Kubectl}

// KubernetesBinaries builds (once) and returns the paths of the named
// Kubernetes components, e.g. KubernetesBinaries(ctx, KubeAPIServer). Any
// missing component of AllKubernetesBinaries is built with them, in the
// same `go build`.
func KubernetesBinaries(ctx context.Context, names ...string) (map[string]string, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "kubernetes-"+KubernetesVersion)
	for _, n := range names {
		if !slices.Contains(AllKubernetesBinaries, n) {
			return nil, fmt.Errorf("unknown Kubernetes component %q", n)
		}
	}
	return ensureBinaries(ctx, dir, AllKubernetesBinaries, func(tmp string, missing []string) error {
		mod, err := writeKubernetesWrapper(ctx, tmp)
		if err != nil {
			return err
		}
		// Without these the binaries report v0.0.0-master, and the kubelet's
		// node status and version skew checks see nonsense.
		pkg := "k8s.io/component-base/version"
		minor := strings.Split(KubernetesVersion, ".")[1]
		ldflags := fmt.Sprintf("-s -w -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=%[3]s -X %[1]s.gitTreeState=clean",
			pkg, KubernetesVersion, minor)
		// With several packages, -o names a directory and each binary is
		// written there under its package's name, which is the cmd dir.
		args := []string{"-ldflags", ldflags}
		for _, n := range missing {
			args = append(args, "k8s.io/kubernetes/cmd/"+n)
		}
		out := filepath.Join(tmp, missing[0])
		if len(missing) > 1 {
			out = tmp + string(filepath.Separator)
		}
		if err := goBuild(ctx, mod, out, args...); err != nil {
			return fmt.Errorf("build %s %s: %w", strings.Join(missing, ", "), KubernetesVersion, err)
		}
		return nil
	})
}

// writeKubernetesWrapper writes a module that requires k8s.io/kubernetes and
// pins each staging module it replaces with a local path (which a dependent
// module cannot use) to the published version instead.
func writeKubernetesWrapper(ctx context.Context, tmp string) (string, error) {
	kdir, err := moduleDir(ctx, "k8s.io/kubernetes", KubernetesVersion)
	if err != nil {
		return "", err
	}
	staging, err := stagingModules(filepath.Join(kdir, "go.mod"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module sidecar-terminator.local/kubernetes-wrapper\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", KubernetesVersion)
	for _, m := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, StagingVersion)
	}
	b.WriteString(")\n")
	mod := filepath.Join(tmp, "wrapper")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return "", fmt.Errorf("create wrapper module: %w", err)
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write wrapper go.mod: %w", err)
	}
	return mod, nil
}

// stagingModules reads the replace block of kubernetes' go.mod and returns
// the modules replaced with ./staging paths.
func stagingModules(gomod string) ([]string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", gomod, err)
	}
	var mods []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[1] == "=>" && strings.HasPrefix(f[2], "./staging/") {
			mods = append(mods, f[0])
		}
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("no staging replaces found in %s", gomod)
	}
	return mods, nil
}

// EtcdBinary builds (once) etcd and returns its path.
func EtcdBinary(ctx context.Context) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "etcd-"+EtcdVersion)
	paths, err := ensureBinaries(ctx, dir, []string{Etcd}, func(tmp string, _ []string) error {
		mod := filepath.Join(tmp, "wrapper")
		if err := os.MkdirAll(mod, 0o755); err != nil {
			return fmt.Errorf("create etcd wrapper: %w", err)
		}
		gomod := fmt.Sprintf("module sidecar-terminator.local/etcd-wrapper\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n", EtcdVersion)
		if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
			return fmt.Errorf("write etcd wrapper go.mod: %w", err)
		}
		if err := goBuild(ctx, mod, filepath.Join(tmp, Etcd), "-ldflags", "-s -w", "go.etcd.io/etcd/server/v3"); err != nil {
			return fmt.Errorf("build etcd %s: %w", EtcdVersion, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return paths[Etcd], nil
}

// moduleDir downloads mod@version into the module cache and returns its dir.
func moduleDir(ctx context.Context, mod, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod+"@"+version)
	cmd.Env = goEnv()
	cmd.Dir = os.TempDir() // outside any module, so no go.mod is consulted
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", mod, version, err, exitStderr(err))
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("parse go mod download %s: %w", mod, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", mod, version, info.Error)
	}
	return info.Dir, nil
}

// goBuild runs `go build -mod=mod -o out args...` in dir, resolving the
// wrapper's missing requirements on the way.
func goBuild(ctx context.Context, dir, out string, args ...string) error {
	full := append([]string{"build", "-mod=mod", "-o", out}, args...)
	cmd := exec.CommandContext(ctx, "go", full...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w: %s", strings.Join(full, " "), dir, err, tail(stderr.String(), 4000))
	}
	return nil
}

// goEnv isolates builds from any go.work and from toolchain switching, which
// would try to download a toolchain we may not be allowed to fetch. The
// cluster's components build with Go's own cgo default, not with the
// CGO_ENABLED=0 the Makefile sets for this module's code (the kubelet's
// dependencies have cgo variants).
func goEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CGO_ENABLED=") })
	return append(env, "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return tail(string(ee.Stderr), 4000)
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// RestartAllContainersByDefault reports whether the cluster's Kubernetes
// admits and runs RestartAllContainers rules at its default gates
// (RestartAllContainersOnContainerExits: alpha in 1.35, beta and on from
// 1.36; pkg/features/kube_features.go at each release).
func RestartAllContainersByDefault() bool {
	var minor int
	fmt.Sscanf(KubernetesVersion, "v1.%d.", &minor)
	return minor >= 36
}
