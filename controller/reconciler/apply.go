package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// result is what became of one action: the apply step returns them as
// values, and absorb alone tells the memory, the metrics and the events.
type result struct {
	action decision.Action
	// at is when the API server answered.
	at time.Time
	// err is the write's error (nil when it took effect).
	err error
	// alreadyDone: a create met its own CRR, made by an earlier run.
	alreadyDone bool
	// made is the CRR as created (creates only).
	made *kruisev1alpha1.ContainerRecreateRequest
}

// apply carries out the plan's actions in order, up to the first that
// failed; an action sent in an earlier round of this sync is not sent again.
func (r *Reconciler) apply(ctx context.Context, pod *corev1.Pod, mem *podMemory, plan decision.Plan, pass int) []result {
	var out []result
	made := map[string]time.Time{} // CRRs created by this plan: when answered
	for _, a := range plan.Actions {
		if pass > 0 && mem.sentThisSync(a) {
			// Sent in an earlier round: the cache cannot show it yet.
			continue
		}
		if a.Kind == decision.ActionRecordAttempt && a.Began.IsZero() {
			// The record of the create just made: it began when the create
			// was answered, no earlier than kruise's creation time.
			name := decision.StageCRRName(pod, a.Stage, a.Attempt)
			a.Began = r.clock.Now()
			if at, ok := made[name]; ok {
				a.Began = at
			} else if mem.knowsCRR(name) {
				a.Began = mem.crr(name).Created
			}
		}
		// Noted before the send: the watch may bring the echo before the answer.
		r.expectEcho(mem, a, happyPath(pod, plan, mem, r.cfg.Policy))
		res := result{action: a, err: r.send(ctx, pod, a)}
		res.at = r.clock.Now()
		if a.Kind == decision.ActionCreateCRR {
			var foreign *ForeignCRRError
			if apierrors.IsAlreadyExists(res.err) && !errors.As(res.err, &foreign) {
				// Made by an earlier run of this controller: the work is done.
				res.err, res.alreadyDone = nil, true
			}
			if res.err == nil {
				res.made = r.newCRR(pod, a)
				made[a.CRRName] = res.at
			}
		}
		if res.err != nil || res.alreadyDone {
			// No write of ours, or one made earlier: no echo of this send.
			r.unexpectEcho(mem)
		}
		out = append(out, res)
		if res.err != nil {
			break
		}
	}
	return out
}

func (r *Reconciler) send(ctx context.Context, pod *corev1.Pod, a decision.Action) error {
	switch a.Kind {
	case decision.ActionCreateCRR:
		return r.write.CreateCRR(ctx, r.newCRR(pod, a), a.ReadPodFirst)
	case decision.ActionRecordAttempt:
		// A compare-and-swap on the record the decision read: a replica
		// whose view is older never moves it back (decision/window.go).
		return r.annotate(ctx, pod, decision.AnnotationCRRAttempts, decision.AttemptRecord(a.Stage, a.Attempt, a.Began))
	case decision.ActionRecordAPIGone:
		// A compare-and-swap too: a replica that found the API gone later
		// never moves an earlier record on.
		return r.annotate(ctx, pod, decision.AnnotationCRRAPIGone, decision.CRRAPIGoneRecord(a.Began))
	case decision.ActionDeleteCRR:
		return r.write.DeleteCRR(ctx, pod.Namespace, a.CRRName)
	case decision.ActionSwapImage:
		patch, err := swapPatch(pod, a.Swaps, a.StageMark)
		if err != nil {
			return err
		}
		return r.write.PatchPod(ctx, pod.Namespace, pod.Name, patch)
	case decision.ActionSettlePhase:
		now := r.clock.Now()
		patch, err := settlePatch(pod, a.Phase, now)
		if err != nil {
			return err
		}
		if err := r.write.PatchPodStatus(ctx, pod.Namespace, pod.Name, patch); err != nil {
			return err
		}
		// A status change alone does not make the kubelet sync the pod, and
		// until it does, its status manager writes its own cached phase
		// (Running) back every 10 s. A change to the pod's metadata makes it
		// sync at once: it then sees the terminal phase, keeps it, and stops
		// the remaining containers itself.
		return r.write.AnnotatePod(ctx, pod.Namespace, pod.Name, pod.UID, AnnotationSettled, now.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// annotate sets one annotation of the pod by compare-and-swap on the value
// read. The cache keeps only our annotations, so a pod that shows none may
// have others: the key is added to the map first, and the map itself only
// if the pod has none at all.
func (r *Reconciler) annotate(ctx context.Context, pod *corev1.Pod, key, value string) error {
	patch, err := annotationPatch(pod, key, value, false)
	if err != nil {
		return err
	}
	err = r.write.PatchPod(ctx, pod.Namespace, pod.Name, patch)
	if err == nil || len(pod.Annotations) > 0 || !testOpFailed(err) {
		return err
	}
	if patch, err = annotationPatch(pod, key, value, true); err != nil {
		return err
	}
	return r.write.PatchPod(ctx, pod.Namespace, pod.Name, patch)
}

func describe(a decision.Action) string {
	switch a.Kind {
	case decision.ActionCreateCRR:
		return fmt.Sprintf("Stopping sidecars %v: created ContainerRecreateRequest %s (attempt %d); kruise-daemon stops them", a.Containers, a.CRRName, a.Attempt)
	case decision.ActionDeleteCRR:
		return fmt.Sprintf("Deleted ContainerRecreateRequest %s of stop-order stage %d (for %v), whose turn is over, so that kruise-daemon takes up the next stage's", a.CRRName, a.Stage, a.Containers)
	case decision.ActionRecordAttempt:
		return fmt.Sprintf("Recorded ContainerRecreateRequest attempt %d of stop-order stage %d, begun at %s, on the pod (%s), so that the count and the attempt's stop window outlive its CRR",
			a.Attempt, a.Stage, a.Began.UTC().Format(time.RFC3339), decision.AnnotationCRRAttempts)
	case decision.ActionRecordAPIGone:
		return fmt.Sprintf("Recorded on the pod (%s) that the ContainerRecreateRequest API was found not served at %s: a sidecar's image swap waits for the stops kruise-daemon may have begun under CRRs made before, counted from then whoever leads",
			decision.AnnotationCRRAPIGone, a.Began.UTC().Format(time.RFC3339))
	case decision.ActionSwapImage:
		if a.JobRule != "" {
			return fmt.Sprintf("Stopping sidecars %v by swapping their image for the quick-exit image %s, not by a ContainerRecreateRequest: %s; the quick-exit image exits 0, which no rule reads", a.Containers, a.Swaps[0].To, a.JobRule)
		}
		return fmt.Sprintf("Stopping sidecars %v: swapped their image for the quick-exit image %s", a.Containers, a.Swaps[0].To)
	case decision.ActionSettlePhase:
		if a.JobRule != "" {
			return fmt.Sprintf("Settled the pod's phase to %s (condition %s) from its main containers before stopping sidecars %v: %s", a.Phase, decision.ConditionSidecarTerminated, a.Containers, a.JobRule)
		}
		if a.LeftRunning {
			return fmt.Sprintf("Settled the pod's phase to %s (condition %s) from its main containers; the node cannot stop sidecars %v, which run on until the pod is deleted", a.Phase, decision.ConditionSidecarTerminated, a.Containers)
		}
		fallthrough
	default:
		return fmt.Sprintf("Settled the pod's phase to %s (condition %s) before stopping ignore-exit-code sidecars %v", a.Phase, decision.ConditionSidecarTerminated, a.Containers)
	}
}
