package virtual

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// newNamespace creates namespace ns for one test and deletes it at the end
// (pods on the virtual nodes go at once; nothing waits for it).
func newNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	if err := cases.CreateNamespace(ctx, suite.clients.Kube, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.clients.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
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
