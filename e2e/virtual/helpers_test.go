package virtual

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// newNamespace creates a namespace for one feature and deletes it at the
// end (pods on the virtual nodes go at once; nothing waits for it).
func newNamespace(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	// Pod creation needs the default ServiceAccount, which KCM creates.
	waitUntil(ctx, t, "ServiceAccount default in "+name, func(ctx context.Context) (bool, error) {
		_, err := suite.kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func waitUntil(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func events(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	return cluster.PodEvents(ctx, suite.kube, pod)
}

func waitForEvent(ctx context.Context, t *testing.T, pod *corev1.Pod, want string) {
	t.Helper()
	waitUntil(ctx, t, want+" event on "+pod.Name, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, pod)
		for _, ev := range evs {
			if ev == want {
				return true, nil
			}
		}
		return false, err
	})
}

// controllerWrites lists the mutating requests the controller's identity
// made in namespace ns, events aside, as "verb resource[/sub] name code".
func controllerWrites(t *testing.T, ns string) []string {
	t.Helper()
	writes, err := cluster.MutatingRequestsIn(suite.audit, cluster.ControllerServiceAccountUser, ns)
	if err != nil {
		t.Fatal(err)
	}
	return writes
}
