// Package virtual runs the image-swap path end to end on mock virtual-kubelet
// nodes: a control plane (etcd, kube-apiserver, kube-controller-manager for
// the Job controller, kube-scheduler), two mock virtual nodes in one
// process (e2e/virtualnode) and the controller binary under its own
// ServiceAccount. Jobs are pinned to the virtual nodes by nodeSelector and
// toleration; their containers run as the workload image's argv says, in
// the same model the simulator uses. Needs no root and no container
// runtime.
//
//	go test ./e2e/virtual -count=1 -v
package virtual

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

var virtualNodes = []string{"virtual-1", "virtual-2"}

var (
	testenv env.Environment
	suite   = &suiteEnv{}
)

// suiteEnv is what Setup started, shared by the features.
type suiteEnv struct {
	cp      *cluster.ControlPlane
	ctl     *cluster.Controller
	nodes   *cluster.VirtualNodes
	clients cases.Clients
	audit   string
	// teardownErr fails the run even when every test passed.
	teardownErr error
}

func TestMain(m *testing.M) {
	// Features run in parallel: each is its own Job in its own namespace.
	testenv = env.NewWithConfig(envconf.New().WithParallelTestEnabled())
	testenv.Setup(suite.start)
	testenv.Finish(suite.stop)
	code := testenv.Run(m)
	if code == 0 && suite.teardownErr != nil {
		code = 1
	}
	os.Exit(code)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "virtual: "+format+"\n", args...)
}

// start brings up the control plane with OpenKruise's CRDs, the virtual
// nodes, and the controller.
func (s *suiteEnv) start(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	t0 := time.Now()
	root, err := filepath.Abs("../..")
	if err != nil {
		return ctx, err
	}
	auditDir, err := os.MkdirTemp("", "st-virtual-audit-")
	if err != nil {
		return ctx, err
	}
	s.audit = filepath.Join(auditDir, "audit.log")
	// The two binaries build while the control plane starts.
	var ctlBin, nodeBin string
	var ctlErr, nodeErr error
	var builds sync.WaitGroup
	builds.Add(2)
	go func() { defer builds.Done(); ctlBin, ctlErr = cluster.BuildController(ctx, root) }()
	go func() { defer builds.Done(); nodeBin, nodeErr = cluster.BuildMockNode(ctx, root) }()
	s.cp, err = cluster.StartControlPlane(ctx, cluster.Options{AuditLogPath: s.audit, Logf: logf,
		ControllerManager: true, Scheduler: true, BeforeControllers: installKruiseCRDs})
	builds.Wait()
	if err != nil {
		return ctx, fmt.Errorf("start control plane: %w", err)
	}
	if err := errors.Join(ctlErr, nodeErr); err != nil {
		return ctx, err
	}
	logf("control plane up and binaries built: %s", time.Since(t0).Round(time.Millisecond))
	// Beside them, a node per provider profile (cases.ProfileNodes), each
	// tainted so that only the profile cases land there.
	s.nodes, err = s.cp.StartVirtualNodes(ctx, nodeBin, append(append([]string{}, virtualNodes...), cases.ProfileNodes...),
		"--pull-delay=300ms", "--start-delay=100ms", "--restart-backoff=1s", "--unpullable="+cases.UnpullableImage)
	if err != nil {
		return ctx, err
	}
	logf("virtual nodes %v Ready: %s", virtualNodes, time.Since(t0).Round(time.Millisecond))
	if err := s.cp.ApplyControllerRBAC(ctx, root); err != nil {
		return ctx, err
	}
	c := &cluster.Cluster{ControlPlane: s.cp}
	// A short swap allowance, so that the provider that ignores the swap
	// (cases.ProviderProfileFeatures, vk-mock) is warned about in seconds.
	if s.ctl, err = c.StartController(ctx, ctlBin, "-v=2", "--swap-start-allowance=15s"); err != nil {
		return ctx, fmt.Errorf("start controller: %w", err)
	}
	s.clients = cases.Clients{Kube: kubernetes.NewForConfigOrDie(s.cp.RestConfig), Dynamic: dynamic.NewForConfigOrDie(s.cp.RestConfig)}
	kc, err := klient.New(s.cp.RestConfig)
	if err != nil {
		return ctx, fmt.Errorf("klient: %w", err)
	}
	cfg.WithClient(kc).WithKubeconfigFile(s.cp.Kubeconfig)
	logf("setup done in %s; run dir %s", time.Since(t0).Round(time.Millisecond), s.cp.RunDir)
	return ctx, nil
}

// installKruiseCRDs installs OpenKruise's CRDs before KCM starts, so its
// garbage collector knows CRRs from the start: the controller sees a
// cluster with OpenKruise and must still swap images on virtual nodes, and
// the mixed test can add a real node with kruise-daemon.
func installKruiseCRDs(ctx context.Context, cp *cluster.ControlPlane) error {
	files, err := cluster.KruiseCRDFiles(ctx)
	if err != nil {
		return err
	}
	return cp.InstallCRDs(ctx, files)
}

// stop saves the logs when E2E_LOGS_DIR is set, then stops the controller
// and the control plane (with the mock-node process), by PID.
func (s *suiteEnv) stop(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	var errs []error
	if s.cp != nil {
		c := &cluster.Cluster{ControlPlane: s.cp, Controller: s.ctl}
		if dst := os.Getenv("E2E_LOGS_DIR"); dst != "" {
			if err := c.SaveLogs(dst); err != nil {
				logf("save logs: %v", err)
			}
		}
		if err := s.ctl.Stop(); err != nil {
			errs = append(errs, err)
		}
		if err := s.cp.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.audit != "" {
		_ = os.RemoveAll(filepath.Dir(s.audit))
	}
	if err := errors.Join(errs...); err != nil {
		// e2e-framework only logs Finish errors at V(2): fail loudly.
		s.teardownErr = err
		logf("FAIL: tear down (something may be left behind): %v", err)
		return ctx, err
	}
	return ctx, nil
}
