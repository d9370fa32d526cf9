package kwok

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// Namespace holds the run's Jobs.
const Namespace = "kwok-jobs"

// sidecarMark is OpenKruise's env for a sidecar to stop by swapping in an
// image; both terminators read it.
const sidecarMark = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE"

// QuickExitImage is the image the sidecars name, which the controller's
// allowlist admits (cluster.QuickExitRepository) and kwok's
// sidecar-quick-exit stage ends.
var QuickExitImage = images.QuickExit.Ref

// job is the i-th Job: one main, one marked sidecar, pinned to the virtual
// nodes. kwok never pulls an image, so the names only need to differ.
func job(i int) *batchv1.Job {
	one, never := int32(1), int32(0)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%05d", i), Namespace: Namespace},
		Spec: batchv1.JobSpec{
			Parallelism: &one, Completions: &one, BackoffLimit: &never,
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{"type": "virtual-kubelet"},
					Containers: []corev1.Container{
						{Name: cluster.KwokMainContainer, Image: images.Workload.Ref},
						{Name: cluster.KwokSidecarContainer, Image: "registry.example/proxy:1",
							Env: []corev1.EnvVar{{Name: sidecarMark, Value: QuickExitImage}}},
					},
				},
			},
		},
	}
}

// submit creates n Jobs through one client (its HTTP/2 connection kept
// alive and shared by the workers).
func submit(ctx context.Context, kube kubernetes.Interface, n, workers int) error {
	return cluster.Parallel(n, workers, func(i int) error {
		if _, err := kube.BatchV1().Jobs(Namespace).Create(ctx, job(i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create job %d: %w", i, err)
		}
		return nil
	})
}
