package reconciler

import (
	"bytes"
	"sync"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// The informers' update handlers drop, before the queue, the updates a sync
// would answer exactly as it answered the version before: those that change
// nothing the decision reads. Most of a pod's updates are such (the kubelet's
// status heartbeats, readiness flips, a resourceVersion-only change once the
// informer's trim has removed the rest, our own settle annotation), and so
// are most of a CRR's (kruise-daemon's per-container progress). Dropping one
// changes when a sync runs, never what it sees: the cache holds the new
// version either way, and any later sync reads it. What depends on time
// alone (a CRR's deadline, a backoff, an expectation's timeout) is woken by
// the sync's own requeue, not by updates.
//
// The filters compare what the decision reads, and are proved against the
// decision itself: a property test over random pod pairs, and the simulator,
// which decides both sides of every update it drops (sim/filter.go).

// decisionConditions are the pod conditions the decision reads
// (decide.go, restart.go); the others (Ready, ContainersReady, PodScheduled,
// Initialized...) flip with probes and phases and change no decision.
var decisionConditions = map[corev1.PodConditionType]bool{
	decision.ConditionSidecarTerminated: true,
	corev1.AllContainersRestarting:      true,
}

// PodUpdateMatters reports whether a sync of the pod could do anything other
// than it did for the old version: false only when the versions differ in
// nothing but their resourceVersion, managed fields and conditions the
// decision does not read. It compares whole pods otherwise, so a field the
// decision starts reading later is never filtered by mistake; the informer's
// trim (kube.TrimPod) has already removed what nothing reads.
//
// Nor does an update between two versions the decision does not consider
// (decision.Considered): finished, being deleted or not yet started, which
// Decide answers VerdictIgnored from the pod alone (the sync that saw the
// pod become so has already forgotten it), or with no sidecar marked and no
// problem in the marks, which it answers VerdictNoSidecars and does
// nothing.
func PodUpdateMatters(old, new *corev1.Pod) bool {
	if old == nil || new == nil {
		return true
	}
	if neitherConsidered(old, new) {
		return false
	}
	return PodViewChanged(old, new)
}

// neitherConsidered is PodUpdateMatters's first rule: two versions of one
// pod, neither of which the decision considers. The pod cache answers it
// from what it kept of each version (kube's neitherConsidered), and then
// asks only PodViewChanged.
func neitherConsidered(old, new *corev1.Pod) bool {
	return old.UID == new.UID && !decision.Considered(old) && !decision.Considered(new)
}

// PodViewChanged is PodUpdateMatters's second rule alone: whether the two
// versions differ in anything but their resourceVersion, managed fields and
// the conditions the decision does not read.
func PodViewChanged(old, new *corev1.Pod) bool {
	if old == nil || new == nil {
		return true
	}
	if podsDiffer(old, new) {
		return true
	}
	return !sameView(old, new)
}

// viewBuffers hold the protobuf encodings sameView compares.
var viewBuffers = sync.Pool{New: func() any { return new([2][]byte) }}

// sameView reports whether the two pods' decision views are equal, compared
// in their protobuf encoding: every field of the API types is in it (a test
// holds that), maps in key order, times as instants, absent and empty lists
// alike, a nil pointer apart from a pointer to an empty value: the equality
// equality.Semantic gives, without its reflection over every field, which
// cost more than the rest of an update's handling (e2e/bench's profile).
func sameView(old, new *corev1.Pod) bool {
	bufs := viewBuffers.Get().(*[2][]byte)
	defer viewBuffers.Put(bufs)
	a, b := podDecisionView(old), podDecisionView(new)
	var errA, errB error
	bufs[0], errA = marshalInto(bufs[0], &a)
	bufs[1], errB = marshalInto(bufs[1], &b)
	// An encoding error (none is known for a decoded pod) is taken as a
	// difference: the update is queued.
	return errA == nil && errB == nil && bytes.Equal(bufs[0], bufs[1])
}

// marshalInto encodes the pod into buf's storage, grown as needed.
func marshalInto(buf []byte, p *corev1.Pod) ([]byte, error) {
	n := p.Size()
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := p.MarshalToSizedBuffer(buf)
	return buf, err
}

// podsDiffer looks first at what most updates that matter change: the
// phase, the containers' states and restarts, their images. A difference
// there is one the whole comparison finds too (each is a field of the
// decision view and of its encoding), so the answer is the same; the
// encoding of both pods is saved on the updates queued anyway, most of a
// burst's. False says only that these fields are alike.
func podsDiffer(a, b *corev1.Pod) bool {
	if a.UID != b.UID || a.Status.Phase != b.Status.Phase || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) ||
		len(a.Spec.Containers) != len(b.Spec.Containers) || len(a.Status.ContainerStatuses) != len(b.Status.ContainerStatuses) {
		return true
	}
	for i := range a.Spec.Containers {
		if a.Spec.Containers[i].Image != b.Spec.Containers[i].Image {
			return true
		}
	}
	for i := range a.Status.ContainerStatuses {
		x, y := &a.Status.ContainerStatuses[i], &b.Status.ContainerStatuses[i]
		if x.RestartCount != y.RestartCount || x.ContainerID != y.ContainerID || x.Image != y.Image ||
			(x.State.Waiting == nil) != (y.State.Waiting == nil) || (x.State.Running == nil) != (y.State.Running == nil) ||
			(x.State.Terminated == nil) != (y.State.Terminated == nil) {
			return true
		}
		if x.State.Terminated != nil && x.State.Terminated.ExitCode != y.State.Terminated.ExitCode {
			return true
		}
	}
	return false
}

// PodAddMatters reports whether a pod the informer adds (a new pod, or
// every pod of the initial list) needs a sync: not one the decision ignores
// outright, as a Job's pod is when created (no container status yet) and
// every finished pod is at a controller's start. Its first update that
// makes it eligible queues it.
func PodAddMatters(pod *corev1.Pod) bool {
	return pod == nil || decision.Considered(pod)
}

// CRREventMatters reports whether a CRR event can change what a sync of its
// pod does, given the pod as the cache holds it (nil when not there): not
// when the decision ignores the pod outright, as it then reads no CRR, nor
// when the pod is not in the cache: its add queues it when it comes, and
// its delete has already queued it (the sync that forgets it).
func CRREventMatters(pod *corev1.Pod) bool {
	return pod != nil && decision.Considered(pod)
}

// podDecisionView is a shallow copy of the pod without what the decision
// does not read; the pod itself is shared with the cache and not touched.
func podDecisionView(p *corev1.Pod) corev1.Pod {
	v := *p
	v.ResourceVersion = ""
	v.ManagedFields = nil
	v.Status.Conditions = nil
	for _, c := range p.Status.Conditions {
		if decisionConditions[c.Type] {
			v.Status.Conditions = append(v.Status.Conditions, c)
		}
	}
	return v
}

// CRRUpdateMatters reports whether a CRR update changes what the decision
// reads of it (crrFacts), the pod it wakes, or what finds it for the pod
// (the pod-UID label).
func CRRUpdateMatters(old, new *kruisev1alpha1.ContainerRecreateRequest) bool {
	if old == nil || new == nil {
		return true
	}
	return old.Namespace != new.Namespace || old.Name != new.Name || old.Spec.PodName != new.Spec.PodName ||
		old.Labels[LabelPodUID] != new.Labels[LabelPodUID] || old.Labels[LabelManagedBy] != new.Labels[LabelManagedBy] ||
		!factsEquality.DeepEqual(crrFacts(old), crrFacts(new))
}

// factsEquality compares the decision's own types: times by instant (as
// metav1.Time compares), nil and empty slices and maps alike.
var factsEquality = conversion.EqualitiesOrDie(func(a, b time.Time) bool { return a.Equal(b) })
