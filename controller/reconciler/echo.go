package reconciler

import (
	"maps"
	"slices"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// A pod of a burst met four syncs where two do the work (the bench's
// profile of 2,000 pods: 4.0 syncs per pod): one when it starts (its mains
// run), one when its mains are done (the write), then the write's own echo
// (the swapped image, or our CRR's add), and its end (Succeeded). The last
// two change the decision's input, so the pure filters (filter.go) keep
// them, but their syncs only confirm what the reconciler already knows:
//
//   - The echo of a write this reconciler made shows nothing it does not
//     remember: the write's sync raised an expectation for it, and returned
//     to look again when the expectation times out. The next sync, woken by
//     that or by any later event, finds the write in the cache
//     (awaitCache) exactly as the echo's sync would have. So the pod
//     handler drops an update that differs from the version before only by
//     the swap the reconciler sent, and the CRR handler the add of the CRR it
//     made, each once.
//   - A pod that Succeeded by itself (not settled by this controller) is
//     ignored by the decision from then on: its sync would decide
//     VerdictIgnored (no Warning: only a Failed pod gets one) and forget the
//     pod. The handler forgets it at once instead of queueing it.
//
// What the echo filter remembers is a note in the pod's memory (podMemory's
// echo): the write whose echo is to be dropped. The informer's handlers
// read it on their own goroutines, beside the pod's sync, so unlike the rest
// of the memory it is read and written only under the reconciler's lock
// (Reconciler.mu), taken once per write and once per event that could be an
// echo. Forgetting the pod forgets the note with it, and so does its
// replacement by another pod of the same name (a new UID): the new pod's
// memory starts with no note, and until it is synced no event of the new
// pod is taken for the old pod's echo (takeEcho asks for the UID).

// expectEcho notes a write about to be sent, for the handlers to recognise
// its echo (dropped again by unexpectEcho when the write fails). Only the
// write of a burst is noted: a swap or a CRR create on the happy path
// (happyPath). Elsewhere the echo's own sync has work: a stop order's next
// stage is planned once the cache shows this stage's write, an
// ignore-exit-code pod's phase is settled once the other sidecars are
// stopped, a sidecar whose earlier write was refused is tried again (the
// simulator's scenarios and soak found each: its check of every drop fails
// on them). Any other write, or a second one before the first's echo,
// leaves the pod's next update to a sync, as before.
func (r *Reconciler) expectEcho(mem *podMemory, a decision.Action, happy bool) {
	burst := happy && a.Stage == 0 && a.StageMark == "" && (a.Kind == decision.ActionSwapImage || a.Kind == decision.ActionCreateCRR)
	r.mu.Lock()
	defer r.mu.Unlock()
	mem.expectEcho(a, burst)
}

// unexpectEcho drops the pod's note: the write failed, or made nothing new.
func (r *Reconciler) unexpectEcho(mem *podMemory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	mem.echoSeen()
}

// takeEcho reports whether the event is the echo of the write noted for the
// pod of that key and UID (echoOf says, given the noted write), and if so
// takes the note: the echo is seen once.
func (r *Reconciler) takeEcho(key cache.ObjectName, uid types.UID, echoOf func(decision.Action) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.pods[key]
	if m == nil || !m.isFor(uid) {
		return false
	}
	if a, ok := m.echoNoted(); !ok || !echoOf(a) {
		return false
	}
	m.echoSeen()
	return true
}

// podEcho reports whether new differs from old only by the swap a.
func podEcho(old, new *corev1.Pod, a decision.Action) bool {
	if old.UID != new.UID || a.Kind != decision.ActionSwapImage {
		return false
	}
	swapped, ok := withSwap(old, a)
	return ok && !PodViewChanged(swapped, new)
}

// crrEcho reports whether crr is the CRR the create a made, showing no
// progress yet. A lagging cache may add the CRR only once kruise has worked
// on it (or failed): that add is news.
func crrEcho(crr *kruisev1alpha1.ContainerRecreateRequest, a decision.Action) bool {
	return a.Kind == decision.ActionCreateCRR && crr.Name == a.CRRName &&
		crr.Labels[LabelManagedBy] == ManagedByValue && notStarted(crr)
}

// notStarted reports whether the CRR's status shows no work on it yet.
func notStarted(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	s := crr.Status
	if (s.Phase != "" && s.Phase != kruisev1alpha1.ContainerRecreateRequestPending) || s.CompletionTime != nil || s.Message != "" {
		return false
	}
	for _, c := range s.ContainerRecreateStates {
		if c.Phase != "" && c.Phase != kruisev1alpha1.ContainerRecreateRequestPending || c.IsKilled {
			return false
		}
	}
	return true
}

// withSwap is old as the swap's patch leaves it: the swapped images, and the
// stop-order stage's mark. False when old is not the version the swap was
// decided on (an image is no longer the one the patch's test op names).
func withSwap(old *corev1.Pod, a decision.Action) (*corev1.Pod, bool) {
	p := *old
	p.Spec.Containers = slices.Clone(old.Spec.Containers)
	for _, s := range a.Swaps {
		if s.Index >= len(p.Spec.Containers) || p.Spec.Containers[s.Index].Name != s.Container || p.Spec.Containers[s.Index].Image != s.From {
			return nil, false
		}
		p.Spec.Containers[s.Index].Image = s.To
	}
	if a.StageMark != "" {
		p.Annotations = maps.Clone(old.Annotations)
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[decision.AnnotationStopStage] = a.StageMark
	}
	return &p, true
}

// happyPath reports whether the plan is a pod's whole stop in one write: its
// only action, no Warning, no failed kill, no refused write remembered, and
// a pod with neither a stop order nor an ignore-exit-code sidecar, whose
// stops come in steps each planned on the cache's view of the one before.
func happyPath(pod *corev1.Pod, plan decision.Plan, mem *podMemory, policy decision.Policy) bool {
	if len(plan.Actions) != 1 || len(plan.Problems) > 0 || len(plan.FailedKills) > 0 || len(mem.refusals()) > 0 ||
		pod.Annotations[decision.AnnotationStopOrder] != "" {
		return false
	}
	containers, _ := decision.Classify(pod, policy)
	for _, c := range containers {
		if c.IgnoreExitCode {
			return false
		}
	}
	return true
}

// finishedByItself reports whether the update is a pod's own end: eligible
// before, Succeeded now and so ignored by the decision (a phase this
// controller settled keeps the pod eligible).
func finishedByItself(old, new *corev1.Pod) bool {
	return old.UID == new.UID && new.Status.Phase == corev1.PodSucceeded && new.DeletionTimestamp == nil &&
		decision.Eligible(old) && !decision.Eligible(new)
}

// PodUpdateMatters is the pod handler's filter with what this reconciler
// knows (see expectEcho): the pure filter's answer, except that the echo of
// its own swap is not queued, and a pod that Succeeded by itself is
// forgotten here rather than by a sync.
func (r *Reconciler) PodUpdateMatters(old, new *corev1.Pod) bool {
	if old != nil && new != nil && neitherConsidered(old, new) {
		return false
	}
	return r.PodViewChangeMatters(old, new)
}

// PodViewChangeMatters is PodUpdateMatters without its first rule, for a
// caller that has answered that one already (the pod cache, which knows of
// each version whether the decision considers it): PodViewChanged, then the
// echo and the pod's own end.
func (r *Reconciler) PodViewChangeMatters(old, new *corev1.Pod) bool {
	if !PodViewChanged(old, new) {
		return false
	}
	if old == nil || new == nil {
		return true
	}
	if finishedByItself(old, new) {
		r.forgetPod(cache.ObjectName{Namespace: new.Namespace, Name: new.Name}, new.UID)
		return false
	}
	key := cache.ObjectName{Namespace: new.Namespace, Name: new.Name}
	return !r.takeEcho(key, new.UID, func(a decision.Action) bool { return podEcho(old, new, a) })
}

// CRRAddMatters is the CRR handler's filter on an added CRR: not the add of
// the CRR this reconciler just made (see expectEcho).
func (r *Reconciler) CRRAddMatters(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	if crr == nil {
		return true
	}
	key := cache.ObjectName{Namespace: crr.Namespace, Name: crr.Spec.PodName}
	return !r.takeEcho(key, types.UID(crr.Labels[LabelPodUID]), func(a decision.Action) bool { return crrEcho(crr, a) })
}
