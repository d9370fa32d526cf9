package sim

import (
	"fmt"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kruisetest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// annotationResolvedUID records which pod kruise's webhook resolved the
// CRR's podName to: the daemon acts on that pod, whatever the owner says.
const annotationResolvedUID = "sim.sidecar-terminator.io/resolved-pod-uid"

var crrResource = schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}

// admitCRR is kruise's webhook and the API server's create: the pod is found
// by name, each target's status is recorded (statusContext), names are unique.
func (w *World) admitCRR(in *kruisev1alpha1.ContainerRecreateRequest) (*kruisev1alpha1.ContainerRecreateRequest, *podEntry, error) {
	key := cache.ObjectName{Namespace: in.Namespace, Name: in.Name}
	if _, ok := w.crrs[key]; ok {
		return nil, nil, apierrors.NewAlreadyExists(crrResource, in.Name)
	}
	e := w.pods[cache.ObjectName{Namespace: in.Namespace, Name: in.Spec.PodName}]
	var pod *corev1.Pod
	if e != nil {
		pod = e.obj
	}
	// kruise's webhook: the pod is whichever has the name now, it must be
	// active (or settled by a sidecar terminator), each target must have a
	// container ID. The simulated nodes all exist.
	if err := kruisetest.Admit(in, pod, true); err != nil {
		return nil, nil, err
	}
	crr := in.DeepCopy()
	if w.s.sc.Faults.CRRLabelStripped {
		delete(crr.Labels, reconciler.LabelManagedBy)
	}
	for i, c := range crr.Spec.Containers {
		for _, st := range e.obj.Status.ContainerStatuses {
			if st.Name == c.Name {
				crr.Spec.Containers[i].StatusContext = &kruisev1alpha1.ContainerRecreateRequestContainerContext{ContainerID: st.ContainerID, RestartCount: st.RestartCount}
			}
		}
	}
	if crr.Annotations == nil {
		crr.Annotations = map[string]string{}
	}
	crr.Annotations[annotationResolvedUID] = string(e.obj.UID)
	crr.CreationTimestamp = metav1.NewTime(w.s.now())
	w.crrUIDs++
	crr.UID = types.UID(fmt.Sprintf("crr-%012x", w.crrUIDs))
	// Status is empty until kruise-daemon takes the CRR up (kruise's
	// webhook writes none): Pending then means it waits behind another.
	crr.Status.Phase = ""
	owner := e.obj.UID
	if len(crr.OwnerReferences) > 0 {
		owner = crr.OwnerReferences[0].UID
	}
	w.crrsOf[owner] = append(w.crrsOf[owner], key)
	w.updateCRR(crr)
	if w.byUID[owner] == nil || w.byUID[owner].gone {
		w.s.after(2*time.Second, func() { w.gcCRRs(owner) })
	}
	w.s.check.crrCounted(crr, e)
	w.s.check.crrCreated(crr, e)
	w.s.crrCreated(crr, e)
	w.s.check.besideKruise(crr, e)
	return crr, e, nil
}

// crrCreated starts kruise's work on a CRR: the daemon of the pod's node
// picks it up; the manager fails it at its deadline.
func (s *Sim) crrCreated(crr *kruisev1alpha1.ContainerRecreateRequest, e *podEntry) {
	if s.sc.Faults.CRRNeverCompleted {
		return
	}
	key := cache.ObjectName{Namespace: crr.Namespace, Name: crr.Name}
	if d := crr.Spec.ActiveDeadlineSeconds; d != nil {
		s.afterForCRR(time.Duration(*d)*time.Second, crr, func() {
			s.finishCRR(key, kruisev1alpha1.ContainerRecreateRequestFailed, "exceeded activeDeadlineSeconds")
		})
	}
	if e.node.daemon != nil {
		s.after(s.jitter(e.node.daemon.spec.Pickup, 0.5), func() { s.daemonPickup(key) })
	}
}

// daemonPickup is kruise-daemon acting on a CRR: SIGTERM (then SIGKILL after
// the grace period) to each running target, through the CRI.
func (s *Sim) daemonPickup(key cache.ObjectName) {
	crr := s.world.crrs[key]
	if crr == nil || crrFinished(crr) || crr.Status.Phase == kruisev1alpha1.ContainerRecreateRequestRecreating {
		return
	}
	if s.daemonBusy(crr) {
		// daemonNext picks it up when the one before it ends; meanwhile
		// the daemon marks it Pending (pickRecreateRequest).
		if crr.Status.Phase == "" {
			next := crr.DeepCopy()
			next.Status.Phase = kruisev1alpha1.ContainerRecreateRequestPending
			s.world.updateCRR(next)
		}
		return
	}
	e := s.world.byUID[types.UID(crr.Annotations[annotationResolvedUID])]
	if e == nil || e.gone || e.rt == nil {
		s.finishCRR(key, kruisev1alpha1.ContainerRecreateRequestFailed, "pod not running")
		return
	}
	d := e.node.daemon
	if d.down && (d.downUntil.IsZero() || s.now().Before(d.downUntil)) {
		if !d.downUntil.IsZero() {
			s.at(d.downUntil, func() { s.daemonPickup(key) })
		}
		return
	}
	if s.chance(d.spec.FailRate) {
		s.finishCRR(key, kruisev1alpha1.ContainerRecreateRequestFailed, "simulated daemon failure")
		return
	}
	stopped := 0
	for _, c := range crr.Spec.Containers {
		s.check.stopRequested(e, c.Name, "crr "+crr.Name)
		ok, err := e.rt.Stop(c.Name, s.now())
		if err != nil {
			panic(err)
		}
		if ok {
			stopped++
			s.trace.add(e.obj.Name, "kruise-daemon stops %s (crr %s)", c.Name, crr.Name)
			s.check.kill(e, c.Name, "crr "+crr.Name)
		}
	}
	if stopped == 0 {
		s.finishCRR(key, kruisev1alpha1.ContainerRecreateRequestCompleted, "nothing to stop")
	} else {
		// Each target's state is Pending while the daemon stops it, and
		// Recreating, killed, once the CRI call returned with the container
		// stopped (manage in crr_daemon_controller.go): daemonPodChanged.
		next := crr.DeepCopy()
		next.Status.Phase = kruisev1alpha1.ContainerRecreateRequestRecreating
		next.Status.ContainerRecreateStates = nil
		for _, c := range crr.Spec.Containers {
			next.Status.ContainerRecreateStates = append(next.Status.ContainerRecreateStates,
				kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{Name: c.Name, Phase: kruisev1alpha1.ContainerRecreateRequestPending})
		}
		s.world.updateCRR(next)
	}
	s.kubeletSync(e)
}

// daemonPodChanged completes the pod's Recreating CRRs whose targets were
// restarted (OnFailure brought them back); under Never they stay Recreating.
func (s *Sim) daemonPodChanged(e *podEntry) {
	for _, key := range s.world.crrsOf[e.obj.UID] {
		crr := s.world.crrs[key]
		if crr == nil || crr.Status.Phase != kruisev1alpha1.ContainerRecreateRequestRecreating {
			continue
		}
		s.daemonKilled(crr, e)
		if recreated(crr, e) {
			key := key
			s.after(100*time.Millisecond, func() { s.finishCRR(key, kruisev1alpha1.ContainerRecreateRequestCompleted, "recreated") })
		}
	}
}

// daemonKilled marks the targets kruise-daemon has finished stopping: the
// container exited (or was restarted) since the CRR was admitted.
func (s *Sim) daemonKilled(crr *kruisev1alpha1.ContainerRecreateRequest, e *podEntry) {
	var next *kruisev1alpha1.ContainerRecreateRequest
	for i, st := range crr.Status.ContainerRecreateStates {
		if st.IsKilled {
			continue
		}
		for _, c := range crr.Spec.Containers {
			if c.Name != st.Name || c.StatusContext == nil {
				continue
			}
			for _, cs := range e.obj.Status.ContainerStatuses {
				if cs.Name == c.Name && (cs.State.Terminated != nil || cs.RestartCount > c.StatusContext.RestartCount) {
					if next == nil {
						next = crr.DeepCopy()
					}
					next.Status.ContainerRecreateStates[i].Phase = kruisev1alpha1.ContainerRecreateRequestRecreating
					next.Status.ContainerRecreateStates[i].IsKilled = true
				}
			}
		}
	}
	if next != nil {
		s.world.updateCRR(next)
	}
}

func recreated(crr *kruisev1alpha1.ContainerRecreateRequest, e *podEntry) bool {
	for _, c := range crr.Spec.Containers {
		found := false
		for _, st := range e.obj.Status.ContainerStatuses {
			if st.Name == c.Name && c.StatusContext != nil && st.RestartCount > c.StatusContext.RestartCount && st.State.Running != nil {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (s *Sim) finishCRR(key cache.ObjectName, phase kruisev1alpha1.ContainerRecreateRequestPhase, why string) {
	crr := s.world.crrs[key]
	if crr == nil || crrFinished(crr) {
		return
	}
	next := crr.DeepCopy()
	next.Status.Phase = phase
	next.Status.Message = why
	ts := metav1.NewTime(s.now())
	next.Status.CompletionTime = &ts
	s.trace.add(crr.Spec.PodName, "crr %s %s (%s)", crr.Name, phase, why)
	s.world.updateCRR(next)
	s.daemonNext(crr)
	if ttl, ok := s.crrTTL(crr); ok {
		s.afterForCRR(ttl, crr, func() { s.world.deleteCRR(key, "ttl after finished") })
	}
}

// afterForCRR runs fn after d if the CRR stored under crr's name is then
// still crr (by UID): kruise-manager times a CRR's deadline and its TTL from
// that object's own fields, so a timer of a CRR since deleted does nothing to
// one re-made under the same name.
func (s *Sim) afterForCRR(d time.Duration, crr *kruisev1alpha1.ContainerRecreateRequest, fn func()) {
	key, uid := cache.ObjectName{Namespace: crr.Namespace, Name: crr.Name}, crr.UID
	s.after(d, func() {
		if s.world.crrIs(key, uid) {
			fn()
		}
	})
}

func crrFinished(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	switch crr.Status.Phase {
	case kruisev1alpha1.ContainerRecreateRequestCompleted, kruisev1alpha1.ContainerRecreateRequestSucceeded, kruisev1alpha1.ContainerRecreateRequestFailed:
		return true
	}
	return false
}

// crrPodUID is the pod UID the controller labelled the CRR with.
func crrPodUID(crr *kruisev1alpha1.ContainerRecreateRequest) types.UID {
	return types.UID(crr.Labels[reconciler.LabelPodUID])
}

// daemonBusy reports whether kruise-daemon works on another CRR of the same
// pod first: it takes up one CRR of a pod at a time, Recreating before
// Pending, the oldest first, skipping finished and deleted ones
// (pickRecreateRequest and crrListByPhaseAndCreated in
// pkg/daemon/containerrecreate of kruise v1.9.1). Under restartPolicy Never a
// CRR whose containers exited stays Recreating until its deadline.
func (s *Sim) daemonBusy(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	for _, key := range s.world.crrsOf[crrOwner(crr)] {
		other := s.world.crrs[key]
		if other == nil || other.Name == crr.Name || crrFinished(other) ||
			other.Annotations[annotationResolvedUID] != crr.Annotations[annotationResolvedUID] {
			continue
		}
		if other.Status.Phase == kruisev1alpha1.ContainerRecreateRequestRecreating ||
			other.CreationTimestamp.Before(&crr.CreationTimestamp) {
			return true
		}
	}
	return false
}

// daemonNext is the daemon seeing a CRR end or go: it takes up the pod's
// next one, if any waits.
func (s *Sim) daemonNext(done *kruisev1alpha1.ContainerRecreateRequest) {
	for _, key := range s.world.crrsOf[crrOwner(done)] {
		crr := s.world.crrs[key]
		if crr == nil || crr.Name == done.Name || crrFinished(crr) || crr.Status.Phase == kruisev1alpha1.ContainerRecreateRequestRecreating {
			continue
		}
		e := s.world.byUID[types.UID(crr.Annotations[annotationResolvedUID])]
		if e == nil || e.node.daemon == nil {
			continue
		}
		key := key
		s.after(s.jitter(e.node.daemon.spec.Pickup, 0.5), func() { s.daemonPickup(key) })
	}
}

// crrOwner is the UID of the pod a CRR is owned by, as crrsOf is keyed.
func crrOwner(crr *kruisev1alpha1.ContainerRecreateRequest) types.UID {
	if len(crr.OwnerReferences) > 0 {
		return crr.OwnerReferences[0].UID
	}
	return types.UID(crr.Annotations[annotationResolvedUID])
}
