package reconciler

import (
	"fmt"
	"strconv"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// ForeignCRRError is a CRR create that met AlreadyExists where the CRR under
// the name is not one this controller made for the pod: someone else took
// the deterministic name. It is a permanent refusal (a Warning, no retry
// storm), never the "already done" an own CRR means.
type ForeignCRRError struct {
	Namespace, Name string
	Why             string
}

func (e *ForeignCRRError) Error() string {
	return fmt.Sprintf("ContainerRecreateRequest %s/%s already exists and is not this controller's for the pod: %s", e.Namespace, e.Name, e.Why)
}

// CheckExistingCRR decides what a create that met AlreadyExists means: nil
// when existing is the CRR we would have made (our managed-by label, the
// same pod UID and pod name), else a *ForeignCRRError. kube.Writer and the
// simulator's writer both call it with the live object.
func CheckExistingCRR(existing, want *kruisev1alpha1.ContainerRecreateRequest) error {
	why := ""
	switch {
	case existing.Labels[LabelManagedBy] != ManagedByValue:
		why = fmt.Sprintf("label %s is %q, not %q", LabelManagedBy, decision.BoundMessage(existing.Labels[LabelManagedBy]), ManagedByValue)
	case existing.Labels[LabelPodUID] != want.Labels[LabelPodUID]:
		why = fmt.Sprintf("it names pod UID %q, not %q", decision.BoundMessage(existing.Labels[LabelPodUID]), want.Labels[LabelPodUID])
	case existing.Spec.PodName != want.Spec.PodName:
		why = fmt.Sprintf("it names pod %q, not %q", decision.BoundMessage(existing.Spec.PodName), want.Spec.PodName)
	default:
		return nil
	}
	return &ForeignCRRError{Namespace: want.Namespace, Name: want.Name, Why: why}
}

// newCRR builds the ContainerRecreateRequest for an action.
func (r *Reconciler) newCRR(pod *corev1.Pod, a decision.Action) *kruisev1alpha1.ContainerRecreateRequest {
	deadline := int64(decision.CRRDeadline(pod, r.cfg.Policy) / time.Second)
	// kruise-daemon's grace period, which kruise's webhook would default to
	// the pod's: written here so the deadline above is seen to cover it.
	grace := int64(decision.PodGrace(pod) / time.Second)
	ttl := int32(r.cfg.CRRTTLAfterFinished / time.Second)
	crr := &kruisev1alpha1.ContainerRecreateRequest{}
	crr.Namespace, crr.Name = pod.Namespace, a.CRRName
	crr.Labels = map[string]string{LabelManagedBy: ManagedByValue, LabelPodUID: string(pod.UID), LabelAttempt: strconv.Itoa(a.Attempt)}
	if a.Stage > 0 {
		crr.Labels[LabelStage] = strconv.Itoa(a.Stage)
	}
	crr.OwnerReferences = []metav1OwnerReference{podOwnerReference(pod)}
	crr.Spec = kruisev1alpha1.ContainerRecreateRequestSpec{
		PodName: pod.Name,
		Strategy: &kruisev1alpha1.ContainerRecreateRequestStrategy{
			FailurePolicy:                 kruisev1alpha1.ContainerRecreateRequestFailurePolicyIgnore,
			ForceRecreate:                 true,
			TerminationGracePeriodSeconds: &grace,
		},
		ActiveDeadlineSeconds:   &deadline,
		TTLSecondsAfterFinished: &ttl,
	}
	for _, c := range a.Containers {
		crr.Spec.Containers = append(crr.Spec.Containers, kruisev1alpha1.ContainerRecreateRequestContainer{Name: c})
	}
	return crr
}

// crrFacts reads what the decision needs from a CRR.
func crrFacts(c *kruisev1alpha1.ContainerRecreateRequest) decision.CRR {
	attempt, _ := strconv.Atoi(c.Labels[LabelAttempt])
	if attempt < 1 {
		// An edited label must not reset the attempt count to zero.
		attempt = 1
	}
	// A missing or edited stage label reads as stage 0, whose CRRs a pod
	// with an order has only for the sidecars it does not name.
	stage, _ := strconv.Atoi(c.Labels[LabelStage])
	f := decision.CRR{Name: c.Name, Attempt: attempt, Stage: max(stage, 0), Phase: string(c.Status.Phase), Created: c.CreationTimestamp.Time}
	if d := c.Spec.ActiveDeadlineSeconds; d != nil {
		f.Deadline = time.Duration(*d) * time.Second
	}
	if c.Status.CompletionTime != nil {
		f.Completed = c.Status.CompletionTime.Time
	}
	f.Message = c.Status.Message
	for _, s := range c.Status.ContainerRecreateStates {
		f.States = append(f.States, decision.CRRContainerState{Name: s.Name, Phase: string(s.Phase), Killed: s.IsKilled})
	}
	for _, ctr := range c.Spec.Containers {
		f.Containers = append(f.Containers, ctr.Name)
		if ctr.StatusContext != nil {
			if f.RestartCounts == nil {
				f.RestartCounts = map[string]int32{}
			}
			f.RestartCounts[ctr.Name] = ctr.StatusContext.RestartCount
		}
	}
	return f
}
