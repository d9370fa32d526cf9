package cases

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
)

// WaitLeader waits until a replica of the installed controller holds its
// Lease: until then the controller acts on nothing.
func WaitLeader(ctx context.Context, cs kubernetes.Interface) error {
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(deploy.Namespace).Get(ctx, deploy.ReleaseName, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		return fmt.Errorf("no leader elected in %s: %w", deploy.Namespace, err)
	}
	return nil
}

// InstalledControllerCompletesAJob is the check after an install (the chart
// from the README, the release from a registry): once a replica leads, a
// Job whose sidecar is marked for a CRR completes on the real node, its
// sidecar stopped by one CRR, with a Normal event.
func InstalledControllerCompletesAJob(ctx context.Context, t *testing.T, cl Clients, name, namespace string) *Observation {
	t.Helper()
	if err := WaitLeader(ctx, cl.Kube); err != nil {
		t.Fatal(err)
	}
	js := JobSpec{Name: name, Namespace: namespace, RestartPolicy: corev1.RestartPolicyNever,
		Containers: []Container{Main("main", 2, 0), Sidecar("proxy", "exit:0", true)}}
	if err := CreateNamespace(ctx, cl.Kube, js.Namespace); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Kube.BatchV1().Jobs(js.Namespace).Create(ctx, js.Build(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return RunAndCheck(ctx, t, cl, js.Namespace, js.Name, 3*time.Minute, Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded,
		ExitCodes: map[string]int32{"main": 0, "proxy": 0}, CRRContainers: []string{"proxy"}, Event: true})
}
