// Package clustertest brings the local real cluster up for one test, the
// way the suites that need a cluster of their own (other options than the
// shared one) all do it.
package clustertest

import (
	"context"
	"os"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

// Env is a cluster brought up for a test, with the controller built (not
// started) and its RBAC applied.
type Env struct {
	*cluster.Cluster
	// Bin is the controller binary; Clients the admin clients.
	Bin     string
	Clients cases.Clients
}

// Up skips the test without root (and fails it under CI=true), brings the
// cluster up with opts, stops it when the test ends (saving its logs to
// $E2E_LOGS_DIR if set), builds the controller and applies its RBAC.
func Up(ctx context.Context, t *testing.T, opts cluster.UpOptions) *Env {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and the local cluster needs root")
		}
		t.Skip("SKIPPED, NOT PASSED: the local cluster needs root (kubelet, containerd, cgroups, network namespaces)")
	}
	opts.Logf = func(f string, a ...any) { t.Logf("harness: "+f, a...) }
	c, err := cluster.Up(ctx, opts)
	if err != nil {
		t.Fatalf("bring the cluster up: %v", err)
	}
	t.Cleanup(func() {
		if dst := os.Getenv("E2E_LOGS_DIR"); dst != "" {
			_ = c.SaveLogs(dst)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("tear down (something may be left behind): %v", err)
		}
	})
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildController(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyControllerRBAC(ctx, root); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Cluster: c, Bin: bin, Clients: cases.Clients{Kube: kube, Dynamic: dyn}}
}
