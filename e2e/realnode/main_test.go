// Package realnode runs the shared e2e cases (package cases) against the
// local real cluster: kube-apiserver, KCM, scheduler, one kubelet +
// containerd node, kruise-manager and kruise-daemon, and the controller as
// a process with its own ServiceAccount. Needs root; see e2e/README.md.
//
//	go test ./e2e/realnode -count=1 -timeout 40m -v   (make e2e-local)
package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

var (
	testenv env.Environment
	// unavailable says why this host cannot run the suite; tests then skip
	// (outside CI) with that message rather than pass.
	unavailable string
	harness     = &realHarness{}
	teardownErr error
	// auditLog is the apiserver's audit log of the controller's writes,
	// for the cases that prove a write was not made.
	auditLog string
)

// realHarness owns the cluster and restarts the controller process.
type realHarness struct {
	cluster *cluster.Cluster
	bin     string
}

func (h *realHarness) RestartController(ctx context.Context) error {
	if err := h.cluster.Controller.Stop(); err != nil {
		return fmt.Errorf("stop controller: %w", err)
	}
	_, err := h.cluster.StartController(ctx, h.bin)
	return err
}

func (h *realHarness) StopKruiseManager(context.Context) (func(context.Context) error, error) {
	return h.cluster.StopKruiseManager(10 * time.Second)
}

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		unavailable = "the real-node suite needs root (kubelet, containerd, cgroups, network namespaces)"
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "FAIL: CI=true and "+unavailable)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	// Parallel: the single-Job features use separate namespaces and wait on
	// the node, not the CPU; run together they overlap their waits.
	testenv = env.NewWithConfig(envconf.New().WithParallelTestEnabled())
	testenv.Setup(func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		t0 := time.Now()
		dir, err := os.MkdirTemp("", "realnode-audit-")
		if err != nil {
			return ctx, err
		}
		auditLog = filepath.Join(dir, "audit.log")
		c, err := cluster.Up(ctx, cluster.UpOptions{AuditLogPath: auditLog, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "harness: "+f+"\n", a...) }})
		if err != nil {
			return ctx, fmt.Errorf("bring the cluster up: %w", err)
		}
		harness.cluster = c
		root, err := repo.Root()
		if err != nil {
			return ctx, err
		}
		if harness.bin, err = cluster.BuildController(ctx, root); err != nil {
			return ctx, err
		}
		if err := c.ApplyControllerRBAC(ctx, root); err != nil {
			return ctx, err
		}
		if _, err := c.StartController(ctx, harness.bin); err != nil {
			return ctx, err
		}
		kc, err := klient.New(c.RestConfig)
		if err != nil {
			return ctx, fmt.Errorf("klient: %w", err)
		}
		cfg.WithClient(kc).WithKubeconfigFile(c.Kubeconfig)
		fmt.Fprintf(os.Stderr, "harness: ready in %s (run dir %s)\n", time.Since(t0).Round(time.Millisecond), c.RunDir)
		return ctx, nil
	})
	testenv.Finish(func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		if harness.cluster == nil {
			return ctx, nil
		}
		if dst := os.Getenv("E2E_LOGS_DIR"); dst != "" {
			if err := harness.cluster.SaveLogs(dst); err != nil {
				fmt.Fprintf(os.Stderr, "harness: %v\n", err)
			}
		}
		if err := harness.cluster.Stop(); err != nil {
			// e2e-framework only logs Finish errors at V(2); fail loudly.
			teardownErr = err
			fmt.Fprintf(os.Stderr, "FAIL: tear down (something may be left behind): %v\n", err)
			return ctx, err
		}
		if err := os.RemoveAll(filepath.Dir(auditLog)); err != nil {
			fmt.Fprintf(os.Stderr, "harness: remove the audit log: %v\n", err)
		}
		fmt.Fprintln(os.Stderr, "harness: stopped; nothing left behind")
		return ctx, nil
	})
	code := testenv.Run(m)
	if code == 0 && teardownErr != nil {
		code = 1
	}
	os.Exit(code)
}

func requireHost(t *testing.T) {
	if unavailable != "" {
		t.Skip("SKIPPED, NOT PASSED: " + unavailable)
	}
}

// The Job's podFailurePolicy against the real Job controller: a stop's exit
// never decides the Job (docs/job-verdict.md).
func TestJobVerdict(t *testing.T) {
	requireHost(t)
	testenv.TestInParallel(t, cases.JobVerdictFeatures(func() string { return auditLog })...)
}

func TestJobs(t *testing.T) {
	requireHost(t)
	testenv.TestInParallel(t, cases.JobFeatures()...)
}

// Container restart rules (KEP-5307) on the real kubelet.
func TestRestartRules(t *testing.T) {
	requireHost(t)
	testenv.TestInParallel(t, cases.RestartRuleFeatures()...)
}

// RestartAllContainers rules (KEP-5532) on a marked sidecar, on the real
// kubelet: the API server refuses the action where its gate is off (by
// default before 1.36), so the rows run from 1.36 on.
func TestRestartAllContainersRules(t *testing.T) {
	requireHost(t)
	if !cluster.RestartAllContainersByDefault() {
		t.Skipf("SKIPPED, NOT PASSED: Kubernetes %s refuses RestartAllContainers rules by default (alpha until 1.36)", cluster.KubernetesVersion)
	}
	testenv.TestInParallel(t, cases.RestartAllFeatures()...)
}

func TestBurstWithControllerRestart(t *testing.T) {
	requireHost(t)
	testenv.Test(t, cases.BurstWithRestartFeature(harness, 50).Feature())
}

// kruise-manager down and back; alone, since the other suites need it up.
func TestKruiseManagerDown(t *testing.T) {
	requireHost(t)
	testenv.Test(t, cases.KruiseManagerDownFeature(harness, 2).Feature())
}
