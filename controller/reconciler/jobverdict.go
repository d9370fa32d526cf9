package reconciler

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// JobReader reads a pod's owning Job live. The controller keeps no Job
// informer: a Job is read only for a pod whose plan asks for it
// (decision.Plan.NeedsJob: a main failed and a CRR is about to stop a
// sidecar), and once per pod (podMemory keeps what was read), so a swap, a
// pod no Job owns or whose mains succeeded costs no read at all.
type JobReader interface {
	LiveJob(ctx context.Context, namespace, name string) (*batchv1.Job, error)
}

// Results of a Job read, the job reads counter's label.
const (
	// JobReadSettle: a podFailurePolicy rule could read the stop's exit
	// code; the phase is settled from the mains before the stop.
	JobReadSettle = "settle"
	// JobReadNoChange: no rule could; the stop goes ahead.
	JobReadNoChange = "no_change"
	// JobReadNotFound: the Job is gone (or replaced under its name).
	JobReadNotFound = "not_found"
	JobReadError    = "error"
)

var jobReadResults = []string{JobReadSettle, JobReadNoChange, JobReadNotFound, JobReadError}

// jobReader is whichever side can read Jobs: the writer's client in the
// controller, the live reader in explain.
func (r *Reconciler) jobReader() (JobReader, bool) {
	if jr, ok := r.write.(JobReader); ok {
		return jr, true
	}
	jr, ok := r.read.(JobReader)
	return jr, ok
}

// readJob is one GET of the pod's owning Job. A Job of that name with
// another UID than the pod's owner reference is not the pod's Job.
func readJob(ctx context.Context, jr JobReader, pod *corev1.Pod, name string) (*decision.JobFacts, error) {
	facts := &decision.JobFacts{Name: pod.Namespace + "/" + name}
	job, err := jr.LiveJob(ctx, pod.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		facts.Missing = true
		return facts, nil
	case err != nil:
		return nil, fmt.Errorf("read Job %s of pod %s/%s: %w", facts.Name, pod.Namespace, pod.Name, err)
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" && o.Name == name && o.UID != job.UID {
			facts.Missing = true
			return facts, nil
		}
	}
	facts.Policy = job.Spec.PodFailurePolicy
	return facts, nil
}
