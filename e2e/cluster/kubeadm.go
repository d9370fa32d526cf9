package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Kubeadm is not run by the local cluster: kind's node images
// (kind/cmd/kindimage) carry it, built from the same wrapper module.
const Kubeadm = "kubeadm"

// KubeadmBinary builds (once) kubeadm at KubernetesVersion, with the same
// version stamp as the cluster's components, and returns its path.
func KubeadmBinary(ctx context.Context) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "kubeadm-"+KubernetesVersion)
	paths, err := ensureBinaries(ctx, dir, []string{Kubeadm}, func(tmp string, _ []string) error {
		mod, err := writeKubernetesWrapper(ctx, tmp)
		if err != nil {
			return err
		}
		pkg := "k8s.io/component-base/version"
		minor := strings.Split(KubernetesVersion, ".")[1]
		ldflags := fmt.Sprintf("-s -w -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=%[3]s -X %[1]s.gitTreeState=clean",
			pkg, KubernetesVersion, minor)
		if err := goBuild(ctx, mod, filepath.Join(tmp, Kubeadm), "-ldflags", ldflags, "k8s.io/kubernetes/cmd/kubeadm"); err != nil {
			return fmt.Errorf("build kubeadm %s: %w", KubernetesVersion, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return paths[Kubeadm], nil
}

// GoModuleBinary builds (once) the main package pkg of module mod at
// version into the cache as name, with Go's defaults (a wrapper module
// requiring mod, so the proxy's copy is built as published), and returns
// its path. kind's node images use it for CoreDNS and the local-path
// provisioner.
func GoModuleBinary(ctx context.Context, name, mod, version, pkg string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, name+"-"+version)
	paths, err := ensureBinaries(ctx, dir, []string{name}, func(tmp string, _ []string) error {
		wrapper := filepath.Join(tmp, "wrapper")
		gomod := fmt.Sprintf("module sidecar-terminator.local/%s-wrapper\n\ngo 1.26.0\n\nrequire %s %s\n", name, mod, version)
		if err := os.MkdirAll(wrapper, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(wrapper, "go.mod"), []byte(gomod), 0o644); err != nil {
			return err
		}
		if err := goBuild(ctx, wrapper, filepath.Join(tmp, name), "-ldflags", "-s -w", pkg); err != nil {
			return fmt.Errorf("build %s %s: %w", name, version, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return paths[name], nil
}
