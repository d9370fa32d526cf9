package apiserver

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// env is one control plane with the controller running against it.
type env struct {
	cp     *cluster.ControlPlane
	ctl    *cluster.Controller
	kube   kubernetes.Interface
	kruise kruiseclient.Interface
	audit  string
	bin    string
}

// binaryDefaults, among startEnv's controller args, runs the controller with
// the binary's own defaults where the harness would otherwise set them (the
// quick-exit allowlist).
const binaryDefaults = "<binary defaults>"

// startEnv starts etcd and kube-apiserver, installs the CRR CRD when asked,
// applies the controller's RBAC and starts the real binary under it.
func startEnv(t *testing.T, ctx context.Context, withCRR bool, controllerArgs ...string) *env {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{audit: filepath.Join(t.TempDir(), "audit.log")}
	e.cp, err = cluster.StartControlPlane(ctx, cluster.Options{AuditLogPath: e.audit, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() { _ = e.cp.Stop() })
	if withCRR {
		files, err := cluster.KruiseCRDFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var crr []string
		for _, f := range files {
			if strings.Contains(filepath.Base(f), "containerrecreaterequests") {
				crr = append(crr, f)
			}
		}
		if err := e.cp.InstallCRDs(ctx, crr); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.cp.ApplyControllerRBAC(ctx, root); err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildController(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	e.bin = bin
	c := &cluster.Cluster{ControlPlane: e.cp}
	controllerArgs = slices.DeleteFunc(slices.Clone(controllerArgs), func(a string) bool {
		c.BinaryDefaultAllowlist = c.BinaryDefaultAllowlist || a == binaryDefaults
		return a == binaryDefaults
	})
	e.ctl, err = c.StartController(ctx, bin, append([]string{"-v=2"}, controllerArgs...)...)
	if err != nil {
		t.Fatalf("start controller: %v\n%s", err, c.Controller.LogTail(40))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log:\n%s", e.ctl.LogTail(60))
		}
		_ = e.ctl.Stop()
	})
	e.kube = kubernetes.NewForConfigOrDie(e.cp.RestConfig)
	e.kruise = kruiseclient.NewForConfigOrDie(e.cp.RestConfig)
	return e
}

func (e *env) createNode(t *testing.T, ctx context.Context, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
}

// createPod creates the pod and then writes its status as a kubelet would.
func (e *env) createPod(t *testing.T, ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	status := pod.Status
	created, err := e.kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	created.Status = status
	updated, err := e.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("write status of pod %s: %v", pod.Name, err)
	}
	return updated
}

func waitUntil(t *testing.T, ctx context.Context, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	waitUntilFor(t, ctx, 60*time.Second, what, cond)
}

// waitUntilFor is waitUntil with its own bound, for what the controller
// waits for by design.
func waitUntilFor(t *testing.T, ctx context.Context, d time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, d, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (e *env) events(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	return cluster.PodEvents(ctx, e.kube, pod)
}

func (e *env) waitForEvent(t *testing.T, ctx context.Context, pod *corev1.Pod, want string) {
	t.Helper()
	waitUntil(t, ctx, want+" event on "+pod.Name, func(ctx context.Context) (bool, error) {
		evs, err := e.events(ctx, pod)
		for _, ev := range evs {
			if ev == want {
				return true, nil
			}
		}
		return false, err
	})
}

func (e *env) metric(ctx context.Context, series string) (float64, error) {
	return e.ctl.Metric(ctx, series)
}

// controllerWrites lists the controller's mutating requests, events and leases aside.
func (e *env) controllerWrites(t *testing.T) []string {
	t.Helper()
	writes, err := cluster.MutatingRequests(e.audit, cluster.ControllerServiceAccountUser)
	if err != nil {
		t.Fatal(err)
	}
	return writes
}
