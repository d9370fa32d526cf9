// Package kubeconfig runs the shared e2e cases (package cases) against any
// cluster where the product is already installed the way users install it:
// kind (kind/up.sh: OpenKruise, the chart, the mock virtual node) or a
// cluster of your own.
//
//	E2E_KUBECONFIG=path [E2E_NODE_KIND=normal|virtual|all] go test ./e2e/kubeconfig -count=1 -v
//	make e2e E2E_ENV=kind|kubeconfig
//
// Without E2E_KUBECONFIG every test skips: `go test ./...` must never run
// Jobs against whatever cluster a developer's KUBECONFIG points at.
package kubeconfig

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
)

var (
	testenv     env.Environment
	unavailable string
	// nodeKind selects the cases: normal (CRR through kruise-daemon),
	// virtual (image swap on the mock node) or all.
	nodeKind = envOr("E2E_NODE_KIND", "all")
	// controllerNS and controllerSelector find the chart's pods.
	controllerNS       = envOr("E2E_CONTROLLER_NAMESPACE", "sidecar-terminator-system")
	controllerSelector = "app.kubernetes.io/name=sidecar-terminator"
	serverMinor        int
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	kubeconfig := os.Getenv("E2E_KUBECONFIG")
	if kubeconfig == "" {
		unavailable = "E2E_KUBECONFIG is not set (make e2e E2E_ENV=kind|kubeconfig sets it)"
		os.Exit(m.Run())
	}
	testenv = env.NewWithConfig(envconf.NewWithKubeConfig(kubeconfig).WithParallelTestEnabled())
	testenv.Setup(func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		kc, err := klient.NewWithKubeConfigFile(kubeconfig)
		if err != nil {
			return ctx, fmt.Errorf("client from %s: %w", kubeconfig, err)
		}
		cfg.WithClient(kc)
		cs, err := kubernetes.NewForConfig(kc.RESTConfig())
		if err != nil {
			return ctx, err
		}
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			return ctx, fmt.Errorf("server version: %w", err)
		}
		serverMinor, _ = strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
		// The product must already be running, as the chart installs it.
		return ctx, waitControllerAvailable(ctx, cs, 3*time.Minute)
	})
	os.Exit(testenv.Run(m))
}

func waitControllerAvailable(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		deps, err := cs.AppsV1().Deployments(controllerNS).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
		if err != nil || len(deps.Items) == 0 {
			return false, nil
		}
		for _, c := range deps.Items[0].Status.Conditions {
			if c.Type == "Available" && c.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

func requireCluster(t *testing.T, kind string) {
	t.Helper()
	if unavailable != "" {
		t.Skip("SKIPPED, NOT PASSED: " + unavailable)
	}
	if nodeKind != "all" && nodeKind != kind {
		t.Skipf("E2E_NODE_KIND=%s", nodeKind)
	}
}

// withoutNativeSidecars drops the native-sidecar case before 1.29, where
// init containers with restartPolicy Always are not sidecars by default.
func withoutNativeSidecars(fs []features.Feature) []features.Feature {
	if serverMinor >= 29 {
		return fs
	}
	var out []features.Feature
	for _, f := range fs {
		if !strings.HasPrefix(f.Name(), "Native sidecar") {
			out = append(out, f)
		}
	}
	return out
}

func TestJobsOnNormalNodes(t *testing.T) {
	requireCluster(t, "normal")
	testenv.TestInParallel(t, withoutNativeSidecars(cases.JobFeatures())...)
}

func TestJobsOnVirtualNode(t *testing.T) {
	requireCluster(t, "virtual")
	// No audit log here: the controller's writes are not counted.
	testenv.TestInParallel(t, cases.VirtualNodeFeatures(cases.VirtualNodeEnv{Timeout: 3 * time.Minute})...)
}

// chartController restarts the controller the way a node drain or a
// rollout would: its pods are deleted and the Deployment replaces them.
type chartController struct{ cfg *envconf.Config }

func (c chartController) RestartController(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.cfg.Client().RESTConfig())
	if err != nil {
		return err
	}
	if err := cs.CoreV1().Pods(controllerNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: controllerSelector}); err != nil {
		return fmt.Errorf("delete controller pods: %w", err)
	}
	return nil
}

func TestBurstWithControllerRestart(t *testing.T) {
	requireCluster(t, "normal")
	testenv.Test(t, cases.BurstWithRestartFeature(chartController{testenv.EnvConf()}, 30).Feature())
}
