package reconciler

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// JobReader reads a pod's owning Job live. The controller keeps no Job
// informer: a Job is read only for a pod whose plan asks for it
// (decision.Plan.NeedsJob: a main failed and a CRR is about to stop a
// sidecar), and once per Job (jobPolicies keeps what was read, by the Job's
// UID), so a swap, a pod no Job owns or whose mains succeeded costs no read
// at all, and the retries of one Job cost one read between them.
type JobReader interface {
	LiveJob(ctx context.Context, namespace, name string) (*batchv1.Job, error)
}

// Results of a Job read, the job reads counter's label.
const (
	// JobReadSettle: a podFailurePolicy rule could read the stop's exit
	// code; the phase is settled from the mains before the stop.
	JobReadSettle = "settle"
	// JobReadSwap: a rule could read a CRR's exit code; the sidecars it
	// reads are stopped by the quick-exit image swap instead.
	JobReadSwap = "swap"
	// JobReadNoChange: no rule could; the stop goes ahead.
	JobReadNoChange = "no_change"
	// JobReadNotFound: the Job is gone (or replaced under its name).
	JobReadNotFound = "not_found"
	JobReadError    = "error"
)

var jobReadResults = []string{JobReadSettle, JobReadSwap, JobReadNoChange, JobReadNotFound, JobReadError}

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

// swapsForJob: the plan stops a sidecar by the quick-exit swap because the
// Job's rule could read a CRR's exit.
func swapsForJob(plan decision.Plan) bool {
	for _, a := range plan.Actions {
		if a.Kind == decision.ActionSwapImage && a.JobRule != "" {
			return true
		}
	}
	return false
}

// jobPolicies remembers what was read of Jobs, by UID, so that the pods of
// one Job (its retries, its parallel pods) cost one read between them. A
// Job's podFailurePolicy cannot change once it is created (the API server's
// ValidateJobSpecUpdate, pkg/apis/batch/validation/validation.go, holds it
// immutable), and a UID is never reused, so what was read stays true: a Job
// gone stays gone. The oldest entries are dropped past jobPoliciesMax.
type jobPolicies struct {
	mu    sync.Mutex
	byUID map[types.UID]*decision.JobFacts
	order []types.UID
}

const jobPoliciesMax = 4096

func (j *jobPolicies) get(uid types.UID) (*decision.JobFacts, bool) {
	if uid == "" {
		return nil, false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	f, ok := j.byUID[uid]
	return f, ok
}

func (j *jobPolicies) put(uid types.UID, f *decision.JobFacts) {
	if uid == "" {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.byUID == nil {
		j.byUID = map[types.UID]*decision.JobFacts{}
	}
	if _, ok := j.byUID[uid]; ok {
		return
	}
	if len(j.order) >= jobPoliciesMax {
		delete(j.byUID, j.order[0])
		j.order = j.order[1:]
	}
	j.byUID[uid] = f
	j.order = append(j.order, uid)
}

// ownerUID is the UID of the pod's owning Job of that name, as its owner
// reference says.
func ownerUID(pod *corev1.Pod, job string) types.UID {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" && o.Name == job && o.Controller != nil && *o.Controller {
			return o.UID
		}
	}
	return ""
}
