package kube

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LiveJob implements reconciler.JobReader: one GET of a failed pod's owning
// Job, for its podFailurePolicy, made only where the plan asks for it. The
// controller watches no Jobs.
func (w Writer) LiveJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return w.Client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
}

// LiveJob implements reconciler.JobReader for explain.
func (l LiveReader) LiveJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	return l.Client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
}
