package reconciler

import (
	"maps"
	"slices"
	"sync"

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
// What the echo filter remembers is not the pod's memory (podMemory, which
// only the pod's sync touches) but a note the sync leaves for the informer's
// handlers, which run on other goroutines: the write and the pod's UID,
// guarded by its own lock, taken once per write and once per event.
type echoes struct {
	mu sync.Mutex
	// byPod: the last successful write of each pod whose echo has not been
	// seen yet.
	byPod map[cache.ObjectName]echo
}

// echo is what a write will look like in the cache.
type echo struct {
	uid    types.UID
	action decision.Action // ActionSwapImage or ActionCreateCRR
}

// expectEcho notes a write about to be sent, for the handlers to recognise
// its echo (dropped again by unexpect when the write fails). Only the write
// of a burst is noted: a swap or a CRR create on the happy path (happyPath).
// Elsewhere the echo's own sync has work: a stop order's next stage is
// planned once the cache shows this stage's write, an ignore-exit-code
// pod's phase is settled once the other sidecars are stopped, a sidecar
// whose earlier write was refused is tried again (the simulator's scenarios
// and soak found each: its check of every drop fails on them). Any other write, or a second one before the
// first's echo, leaves the pod's next update to a sync, as before.
func (e *echoes) expectEcho(pod *corev1.Pod, a decision.Action, happy bool) {
	key := cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}
	e.mu.Lock()
	defer e.mu.Unlock()
	burst := happy && a.Stage == 0 && a.StageMark == "" && (a.Kind == decision.ActionSwapImage || a.Kind == decision.ActionCreateCRR)
	if _, twice := e.byPod[key]; twice || !burst {
		delete(e.byPod, key)
		return
	}
	if e.byPod == nil {
		e.byPod = map[cache.ObjectName]echo{}
	}
	e.byPod[key] = echo{uid: pod.UID, action: a}
}

// unexpect drops the pod's note: the write failed, or made nothing new.
func (e *echoes) unexpect(pod *corev1.Pod) {
	e.forget(cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name})
}

// forget drops the pod's note (the pod is forgotten).
func (e *echoes) forget(key cache.ObjectName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byPod, key)
}

// takePodEcho reports whether new differs from old only by the noted swap,
// and if so takes the note: the echo is seen once.
func (e *echoes) takePodEcho(old, new *corev1.Pod) bool {
	key := cache.ObjectName{Namespace: new.Namespace, Name: new.Name}
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ok := e.byPod[key]
	if !ok || n.uid != new.UID || old.UID != new.UID || n.action.Kind != decision.ActionSwapImage {
		return false
	}
	swapped, ok := withSwap(old, n.action)
	if !ok || PodUpdateMatters(swapped, new) {
		return false
	}
	delete(e.byPod, key)
	return true
}

// takeCRREcho reports whether crr is the CRR the pod's noted create made,
// showing no progress yet, and if so takes the note. A lagging cache may add
// the CRR only once kruise has worked on it (or failed): that add is news.
func (e *echoes) takeCRREcho(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	key := cache.ObjectName{Namespace: crr.Namespace, Name: crr.Spec.PodName}
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ok := e.byPod[key]
	if !ok || n.action.Kind != decision.ActionCreateCRR || crr.Name != n.action.CRRName ||
		crr.Labels[LabelPodUID] != string(n.uid) || crr.Labels[LabelManagedBy] != ManagedByValue || !notStarted(crr) {
		return false
	}
	delete(e.byPod, key)
	return true
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
// knows (see echoes): the pure filter's answer, except that the echo of
// its own swap is not queued, and a pod that Succeeded by itself is
// forgotten here rather than by a sync.
func (r *Reconciler) PodUpdateMatters(old, new *corev1.Pod) bool {
	if !PodUpdateMatters(old, new) {
		return false
	}
	if old == nil || new == nil {
		return true
	}
	if finishedByItself(old, new) {
		r.forgetPod(cache.ObjectName{Namespace: new.Namespace, Name: new.Name}, new.UID)
		return false
	}
	return !r.echoes.takePodEcho(old, new)
}

// CRRAddMatters is the CRR handler's filter on an added CRR: not the add of
// the CRR this reconciler just made (see echoes).
func (r *Reconciler) CRRAddMatters(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	return crr == nil || !r.echoes.takeCRREcho(crr)
}
