package sim

import (
	"context"
	"strings"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// kruiseTerminatorLag is how late OpenKruise's own SidecarTerminator sees a
// pod change (its informer), before its reconcile.
const kruiseTerminatorLag = 30 * time.Millisecond

// kruiseTerminatorPodChanged is OpenKruise's own SidecarTerminator seeing a
// pod change, when the scenario runs it beside the controller. Modelled from
// github.com/openkruise/kruise v1.9.1, pkg/controller/sidecarterminator/:
// isInterestingPod and getSidecarContainerNames (utils.go,
// sidecar_terminator_controller.go) and executeKillContainerAction
// (kill_container_action.go): on a normal node, once every main has
// terminated (Never) or exited 0 (OnFailure), one CRR named
// sidecar-termination-<pod UID>, owned by the pod, no labels, no deadline,
// naming the env-marked sidecars not yet terminated; none if it exists.
// Not modelled: its in-place image update on virtual-kubelet nodes and its
// settle for ignore-exit-code sidecars (the scenario has neither).
func (s *Sim) kruiseTerminatorPodChanged(e *podEntry) {
	if !s.sc.KruiseTerminator || e.node == nil || e.node.virtual {
		return
	}
	s.after(s.jitter(kruiseTerminatorLag, 0.5), func() { s.kruiseTerminatorSync(e) })
}

func (s *Sim) kruiseTerminatorSync(e *podEntry) {
	pod := e.obj
	if e.gone || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodPending || pod.Spec.RestartPolicy == corev1.RestartPolicyAlways {
		return
	}
	status := map[string]*corev1.ContainerStatus{}
	for i := range pod.Status.ContainerStatuses {
		status[pod.Status.ContainerStatuses[i].Name] = &pod.Status.ContainerStatuses[i]
	}
	if len(status) != len(pod.Spec.Containers) {
		return // containersCompleted: every container has a status
	}
	var todo []kruisev1alpha1.ContainerRecreateRequestContainer
	for _, c := range pod.Spec.Containers {
		st := status[c.Name]
		if !kruiseMarked(c) {
			done := st.State.Terminated != nil
			if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
				done = done && st.State.Terminated.ExitCode == 0
			}
			if !done {
				return // a main is not done
			}
			continue
		}
		if st.State.Terminated == nil {
			todo = append(todo, kruisev1alpha1.ContainerRecreateRequestContainer{Name: c.Name})
		}
	}
	if len(todo) == 0 {
		return
	}
	name := decision.KruiseTerminatorCRRName(pod)
	if s.world.crrs[cache.ObjectName{Namespace: pod.Namespace, Name: name}] != nil {
		return
	}
	crr := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name, Containers: todo,
			Strategy: &kruisev1alpha1.ContainerRecreateRequestStrategy{ForceRecreate: true,
				FailurePolicy: kruisev1alpha1.ContainerRecreateRequestFailurePolicyIgnore}},
	}
	if _, _, err := s.world.admitCRR(crr); err == nil {
		s.trace.add(pod.Name, "kruise's SidecarTerminator creates crr %s", name)
	}
}

// kruiseMarked is isSidecarContainer in utils.go: the env mark "true" (any
// case) or an image; this controller's annotation is not kruise's.
func kruiseMarked(c corev1.Container) bool {
	for _, env := range c.Env {
		if env.Name == decision.EnvTerminate && strings.EqualFold(env.Value, "true") ||
			env.Name == decision.EnvTerminateWithImage && env.Value != "" {
			return true
		}
	}
	return false
}

// isKruiseTerminatorCRR: made by OpenKruise's own SidecarTerminator.
func isKruiseTerminatorCRR(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	return strings.HasPrefix(crr.Name, decision.KruiseTerminatorCRRPrefix) && crr.Labels[reconciler.LabelManagedBy] == ""
}

// KruiseTerminatorCRR is the controller's live read of kruise's CRR
// (reconciler.SecondTerminatorReader), answered from the world, as the
// other live reads are. It is not counted among them (stats.liveReads),
// as it never was.
func (w *apiWriter) KruiseTerminatorCRR(_ context.Context, pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	crr := w.s.world.crrs[cache.ObjectName{Namespace: pod.Namespace, Name: decision.KruiseTerminatorCRRName(pod)}]
	if crr == nil || len(crr.OwnerReferences) == 0 || crr.OwnerReferences[0].UID != pod.UID {
		return nil, nil
	}
	return crr, nil
}

// besideKruise checks the controller's rule beside OpenKruise's own
// terminator: once it has said it saw it (a SecondTerminator Warning), it
// makes no CRR for a pod whose mains finished after that while kruise's
// CRR for the pod is in flight. Before, a race of the two is expected.
func (ch *Checker) besideKruise(crr *kruisev1alpha1.ContainerRecreateRequest, e *podEntry) {
	if !ch.s.sc.KruiseTerminator || isKruiseTerminatorCRR(crr) || ch.secondSeenAt.IsZero() ||
		e.truth.mainsDoneAt.Before(ch.secondSeenAt) {
		return
	}
	theirs := ch.s.world.crrs[cache.ObjectName{Namespace: e.obj.Namespace, Name: decision.KruiseTerminatorCRRName(e.obj)}]
	if theirs != nil && !crrFinished(theirs) {
		ch.violate("safety", e, "CRR %s made beside OpenKruise's %s, after the controller had seen that terminator", crr.Name, theirs.Name)
	}
}

// finalBesideKruise: beside kruise's terminator, the controller must have
// noticed it.
func (ch *Checker) finalBesideKruise() {
	if ch.s.sc.KruiseTerminator && ch.secondSeenAt.IsZero() && ch.violation == nil {
		ch.record("visibility", "-", "OpenKruise's own SidecarTerminator ran beside the controller and no SecondTerminator Warning said so")
	}
}
