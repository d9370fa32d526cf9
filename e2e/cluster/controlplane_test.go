package cluster

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestControlPlaneCreatesPod starts etcd + kube-apiserver alone (no KCM, no
// node) and checks that a pod is admitted: RBAC, the ServiceAccount
// admission and the harness's stand-in for the default ServiceAccount work.
func TestControlPlaneCreatesPod(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	audit := t.TempDir() + "/audit.log"
	cp, err := StartControlPlane(ctx, Options{AuditLogPath: audit, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(cp.RestConfig)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "example.invalid/x:1"}},
		},
	}
	got, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if got.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName = %q, want default (ServiceAccount admission)", got.Spec.ServiceAccountName)
	}

	// A ServiceAccount kubeconfig is subject to RBAC: no rights by default.
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create serviceaccount: %v", err)
	}
	kc, err := cp.ServiceAccountKubeconfig(ctx, "default", "reader")
	if err != nil {
		t.Fatalf("serviceaccount kubeconfig: %v", err)
	}
	sa, err := clientFromKubeconfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Errorf("serviceaccount without RBAC could list pods; authorization is not on")
	}

	// The audit log records the pod creation (batched: wait for the flush).
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(audit)
		if containsAll(string(data), `"verb":"create"`, `"resource":"pods"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log %s has no pod create event", audit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
