package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// The confirm step: the plan names what it assumed absent or finished that
// the input cannot vouch for (decision.Plan.Confirm, decision/confirm.go
// holds the rule), and it is read live here, in one step, before anything
// is written. The pod and CRR informers are separate watches, so the cache
// can show a pod older or newer than its CRRs, and a new leader remembers
// nothing; these reads are what keeps a second stop from starting inside
// the first one's window when the cache and the memory both miss it. The
// happy path asks for none.

// LiveChecker reads pods and CRRs from the API server, past the caches: the
// plan's confirm (decision.Plan.Confirm), and an overdue write's effect
// (expect.go).
type LiveChecker interface {
	// LivePod reads the pod from the API server.
	LivePod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// LiveCRR reads the named CRR from the API server; an error for which
	// apierrors.IsNotFound is true when there is none.
	LiveCRR(ctx context.Context, namespace, name string) (*kruisev1alpha1.ContainerRecreateRequest, error)
}

// LiveReader is every read a sync makes past the caches: the confirm
// step's (LiveChecker), a pod's owning Job (JobReader) and OpenKruise's
// terminator's CRR (SecondTerminatorReader). It is a dependency New
// requires, not a capability found on the Writer or the Reader: when it was
// found on the Writer by type assertion, a wrapper of the writer hid it and
// the binary confirmed nothing live and read no Job, while every test,
// given an unwrapped fake, passed.
type LiveReader interface {
	LiveChecker
	JobReader
	SecondTerminatorReader
}

// NoLiveReads is the LiveReader of a reconciler its caller means to read
// nothing live (one that only plans, or a benchmark of the sync's own
// cost). Every read fails with an error that says so: a plan that needs one
// is not carried out on what could not be checked. The one exception is
// the rule's own: a look for OpenKruise's terminator's CRR that cannot be
// read decides the pod as without it (confirm).
type NoLiveReads struct{}

var errNoLiveReads = errors.New("this reconciler was built to read nothing live (NoLiveReads)")

func (NoLiveReads) LivePod(context.Context, string, string) (*corev1.Pod, error) {
	return nil, errNoLiveReads
}

func (NoLiveReads) LiveCRR(context.Context, string, string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return nil, errNoLiveReads
}

func (NoLiveReads) LiveJob(context.Context, string, string) (*batchv1.Job, error) {
	return nil, errNoLiveReads
}

func (NoLiveReads) KruiseTerminatorCRR(context.Context, *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return nil, errNoLiveReads
}

// confirmed is what the confirm step read, for absorb.
type confirmed struct {
	// crrs are our CRRs found live that the input did not have as they are.
	crrs []decision.CRR
	// job is the pod's owning Job as read (nil: not read); jobCached the
	// same, known from an earlier read of the Job for another of its pods.
	job, jobCached *decision.JobFacts
	// looked is the look made for OpenKruise's terminator's CRR (0: none),
	// second what it found.
	looked decision.SecondLook
	second *decision.SecondTerminator
	// gone says why the pod is no longer to be looked at: it is gone, or
	// replaced by another of the same name ("" while it stands).
	gone string
	// absent names the CRRs the API server has not; unlisted those of ours
	// it has that the informer never lists (a policy stripped our label).
	absent, unlisted map[string]bool
}

// liveReads carries what one sync has read live from one round to the next,
// so that a later round (after a refused write) asks for none of it again.
type liveReads struct {
	crrs []string
	pod  bool
}

func (l *liveReads) into(in *decision.Input) {
	in.ReadLive, in.PodLive = append([]string(nil), l.crrs...), in.PodLive || l.pod
}

func (l *liveReads) add(in decision.Input) {
	l.crrs, l.pod = append(l.crrs[:0], in.ReadLive...), in.PodLive
}

// wrote forgets the reads of CRRs this round wrote to: a read from before a
// write (a delete that got no answer) says nothing about after it.
func (l *liveReads) wrote(results []result) {
	for _, res := range results {
		if name := res.action.CRRName; name != "" {
			l.crrs = slices.DeleteFunc(l.crrs, func(n string) bool { return n == name })
		}
	}
}

// confirm reads live what the plan asked for and returns the input with it.
// A failed read is an error: the sync is retried, and nothing is written on
// an assumption that could not be checked.
func (r *Reconciler) confirm(ctx context.Context, in decision.Input, c decision.Confirm) (decision.Input, confirmed, error) {
	got := confirmed{absent: map[string]bool{}, unlisted: map[string]bool{}}
	pod := in.Pod
	if c.Pod {
		p, err := r.live.LivePod(ctx, pod.Namespace, pod.Name)
		switch {
		case apierrors.IsNotFound(err):
			// Gone: the cache's delete event brings the pod back, and it is forgotten.
			got.gone = "the pod is gone"
			return in, got, nil
		case err != nil:
			return in, got, fmt.Errorf("read live what the plan for pod %s/%s assumed: the pod: %w", pod.Namespace, pod.Name, err)
		case p.UID != pod.UID:
			got.gone = "the pod was replaced by another of the same name"
			return in, got, nil
		}
		in.Pod, pod = p, p
	}
	in.PodLive = in.PodLive || c.Pod
	for _, want := range c.CRRs {
		in.ReadLive = append(in.ReadLive, want.Create.CRRName)
		crr, err := r.liveOwnCRR(ctx, in, want)
		if apierrors.IsNotFound(err) {
			got.absent[want.Create.CRRName] = true
			continue
		}
		if err != nil {
			return in, got, err
		}
		if crr != nil {
			got.unlisted[crr.Name] = unlisted(crr)
			f := crrFacts(crr)
			got.crrs = append(got.crrs, f)
			in.CRRs = withCRR(in.CRRs, f)
			// A create of it that got no answer was applied after all: it
			// is no refusal, and no failed kill.
			in.Refusals = slices.DeleteFunc(in.Refusals, func(r decision.Refusal) bool {
				return r.Kind == decision.ActionCreateCRR && r.CRRName == f.Name
			})
			in.RefusedCRRs = slices.DeleteFunc(in.RefusedCRRs, func(a decision.Action) bool { return a.CRRName == f.Name })
		}
	}
	if c.Job != "" {
		// A Job's policy is read once per Job (jobPolicies): the pods of
		// one Job after the first take it from there, with no read.
		uid := ownerUID(pod, c.Job)
		if facts, ok := r.jobs.get(uid); ok {
			in.Job, got.jobCached = facts, facts
		} else {
			facts, err := readJob(ctx, r.live, pod, c.Job)
			if err != nil {
				r.metrics.JobReads.WithLabelValues(JobReadError).Inc()
				return in, got, err
			}
			r.jobs.put(uid, facts)
			in.Job, got.job = facts, facts
		}
	}
	if c.SecondTerminator != 0 {
		got.looked = c.SecondTerminator
		in.SecondLooked |= c.SecondTerminator
		// Not found, or not readable now: the pod is decided as without it.
		if crr, err := r.live.KruiseTerminatorCRR(ctx, pod); err == nil && crr != nil {
			got.second = secondFacts(crr)
			in.SecondTerminator = got.second
		}
	}
	return in, got, nil
}

// liveOwnCRR reads the CRR the plan asked about from the API server: a
// NotFound error when there is none; nil unless it is ours (even with our managed-by label stripped by a
// policy: kruise works on it all the same; anyone else's under the name is
// not taken for ours, CheckExistingCRR), is not being deleted, and was
// created after the time asked (a name whose earlier CRR is remembered).
func (r *Reconciler) liveOwnCRR(ctx context.Context, in decision.Input, want decision.ConfirmCRR) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	pod := in.Pod
	crr, err := r.live.LiveCRR(ctx, pod.Namespace, want.Create.CRRName)
	switch {
	case apierrors.IsNotFound(err):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("read live what the plan for pod %s/%s assumed: CRR %s: %w", pod.Namespace, pod.Name, want.Create.CRRName, err)
	case CheckExistingCRR(crr, r.newCRR(pod, want.Create)) != nil, crr.DeletionTimestamp != nil,
		!want.MadeAfter.IsZero() && !crr.CreationTimestamp.Time.After(want.MadeAfter):
		return nil, nil
	}
	return crr, nil
}

// withCRR is crrs with c in place of the CRR of the same name, or added.
func withCRR(crrs []decision.CRR, c decision.CRR) []decision.CRR {
	out := make([]decision.CRR, 0, len(crrs)+1)
	for _, k := range crrs {
		if k.Name != c.Name {
			out = append(out, k)
		}
	}
	return append(out, c)
}
