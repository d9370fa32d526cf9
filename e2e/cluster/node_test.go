package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

// TestNodeRunsPodAndCleansUp runs a real container to completion on the
// node, then checks that Stop leaves no process, mount, link, chain or
// cgroup behind.
func TestNodeRunsPodAndCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node; skipped with -short")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root: the real node cannot run")
		}
		t.Skip("needs root to run kubelet and containerd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tars, err := oci.WriteAll(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("build images: %v", err)
	}
	cp, err := StartControlPlane(ctx, Options{ControllerManager: true, Scheduler: true, KeepRunDir: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	runDir := cp.RunDir
	var node *Node
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if node != nil {
			if err := node.Stop(); err != nil {
				t.Errorf("stop node: %v", err)
			}
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("logs kept in %s/logs", runDir)
			return
		}
		_ = os.RemoveAll(runDir)
	})
	t0 := time.Now()
	node, err = StartNode(ctx, cp, NodeOptions{Images: tars})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Logf("node Ready in %s", time.Since(t0).Round(time.Millisecond))

	cs := kubernetes.NewForConfigOrDie(cp.RestConfig)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: images.Workload.Ref, ImagePullPolicy: corev1.PullNever,
				Args: []string{"main", "--seconds", "1", "--exit-code", "3"},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	var got *corev1.Pod
	err = waitFor(ctx, "pod Failed", 2*time.Minute, nil, func(ctx context.Context) (bool, error) {
		got, err = cs.CoreV1().Pods("default").Get(ctx, "once", metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodFailed, err
	})
	if err != nil {
		nodeObj, _ := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		t.Fatalf("%v; pod status: %+v; node taints: %+v", err, got.Status, nodeObj.Spec.Taints)
	}
	term := got.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 3 {
		t.Errorf("main container state = %+v, want terminated with exit code 3", got.Status.ContainerStatuses[0].State)
	}
	logs, _ := filepath.Glob(filepath.Join(node.RunDir, "pod-logs", "default_once_*", "main", "*.log"))
	if len(logs) == 0 {
		t.Errorf("no container log under %s/pod-logs", node.RunDir)
	}

	stop()
	if left := CheckClean(runDir); len(left) > 0 {
		t.Errorf("left behind after Stop: %v", left)
	}
}
