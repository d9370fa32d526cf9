package reconciler

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

type metav1OwnerReference = metav1.OwnerReference

func podOwnerReference(pod *corev1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
}

// memory returns the reconciler's memory of the pod, fresh when the pod was
// replaced by another of the same name.
func (r *Reconciler) memory(key cache.ObjectName, uid types.UID) *podMemory {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.pods[key]
	if m == nil || !m.isFor(uid) {
		if m != nil && m.isTracked() {
			r.tracked--
		}
		m = newPodMemory(uid, r.clock.Now())
		r.pods[key] = m
	}
	return m
}

// IdleWake reports whether a wake of the key has nothing to decide: the
// cache holds a pod the decision does not consider, and this reconciler
// remembers nothing of the pod. Its sync would decide VerdictIgnored or
// VerdictNoSidecars with no action and no problem (decision.Considered)
// and forget nothing, so Sync passes over it without reading the pod. Such
// wakes are the expectation timers of pods that finished: each write's sync
// asks to look again when the write's expectation times out (requeueAfter),
// and the pod's own end is forgotten by the update handler before that
// (PodViewChangeMatters). In e2e/bench's 20,000-pod burst they were 7,000
// to 8,568 of the 27,000 to 28,568 syncs of a round. A pod remembered (a
// Failed pod this controller tracked, whose sync raises its Warning) is
// synced, and so is every wake where the Reader cannot tell.
func (r *Reconciler) IdleWake(key cache.ObjectName) bool {
	c, ok := r.read.(ConsideredReader)
	if !ok {
		return false
	}
	if considered, held := c.PodConsidered(key.Namespace, key.Name); !held || considered {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[key] == nil
}

func (r *Reconciler) forget(key cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(key)
}

// forgetPod forgets the pod unless the memory under its key is of another
// pod of the same name. The informer's handler calls it (PodUpdateMatters)
// while a sync of the pod may run: that sync keeps the memory it holds, and
// whatever it records there goes with it. The memory of an earlier pod of
// the name is left to the key's sync, which the earlier pod's delete (or
// the update to the new UID, on a relist) queued: it replaces or forgets it.
func (r *Reconciler) forgetPod(key cache.ObjectName, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.pods[key]; m != nil && !m.isFor(uid) {
		return
	}
	r.forgetLocked(key)
}

// forgetLocked forgets the pod; r.mu is held.
func (r *Reconciler) forgetLocked(key cache.ObjectName) {
	if m := r.pods[key]; m != nil && m.isTracked() {
		r.tracked--
	}
	delete(r.pods, key)
	r.metrics.PodsTracked.Set(float64(r.tracked))
}

// track keeps the pods-tracked gauge: pods with sidecars still to stop or being stopped.
func (r *Reconciler) track(key cache.ObjectName, v decision.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.pods[key]
	if m == nil {
		return
	}
	tracked := v == decision.VerdictMainsActive || v == decision.VerdictAct || v == decision.VerdictInProgress || v == decision.VerdictNoPath
	switch {
	case tracked && !m.isTracked():
		r.tracked++
	case !tracked && m.isTracked():
		r.tracked--
	}
	m.setTracked(tracked)
	r.metrics.PodsTracked.Set(float64(r.tracked))
}

// satisfied reports whether the cache shows the effect of every pending write.
func (r *Reconciler) satisfied(pod *corev1.Pod, pending []expectation) bool {
	for _, e := range pending {
		switch e.action.Kind {
		case decision.ActionCreateCRR:
			crrs, err := r.read.CRRs(pod)
			if err != nil {
				return false
			}
			found := false
			for _, c := range crrs {
				found = found || c.Name == e.action.CRRName
			}
			if !found {
				return false
			}
		case decision.ActionDeleteCRR:
			crrs, err := r.read.CRRs(pod)
			if err != nil {
				return false
			}
			for _, c := range crrs {
				if c.Name == e.action.CRRName {
					return false
				}
			}
		case decision.ActionSwapImage, decision.ActionSettlePhase, decision.ActionRecordAttempt, decision.ActionRecordAPIGone:
			if !podShows(pod, e.action) {
				return false
			}
		}
	}
	return true
}
