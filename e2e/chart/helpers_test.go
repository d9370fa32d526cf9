package chart

import (
	"context"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// testEnv is what every test here starts from.
type testEnv struct {
	ctx context.Context
	// root is the repository; helm the helm binary, built on first use.
	root, helm string
}

// newTestEnv gives a context of timeout, cancelled when the test ends,
// the repository root and helm.
func newTestEnv(t *testing.T, timeout time.Duration) testEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		t.Fatalf("build helm: %v", err)
	}
	return testEnv{ctx: ctx, root: root, helm: helm}
}

// newControlPlaneEnv is newTestEnv for the tests that need an API server
// but no node: skipped with -short, 15 minutes, and etcd and
// kube-apiserver, stopped when the test ends.
func newControlPlaneEnv(t *testing.T) (testEnv, *cluster.ControlPlane) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; skipped with -short")
	}
	e := newTestEnv(t, 15*time.Minute)
	cp, err := cluster.StartControlPlane(e.ctx, cluster.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return e, cp
}
