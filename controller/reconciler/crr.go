package reconciler

import (
	"fmt"
	"math"
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
// when existing is the CRR we would have made, else a *ForeignCRRError.
// kube.Writer and the simulator's writer both call it with the live object.
//
// Ours carries our managed-by label and names the same pod UID and pod name.
// A policy engine may strip the managed-by label as the CRR is admitted (our
// informer, which lists by that label, then never shows it; see unlisted),
// and kruise-daemon acts on the CRR all the same: taken for anyone else's,
// its kill would count as failed and a swap or the next CRR would land in
// the stop it makes. So a CRR without that label is ours when it carries
// every other mark this controller writes together for this very attempt:
// the pod UID, attempt and stage labels, the pod's name, an owner reference
// to the pod and our deadline. A CRR whose managed-by label names someone
// else, or that lacks one of those marks, is someone else's.
func CheckExistingCRR(existing, want *kruisev1alpha1.ContainerRecreateRequest) error {
	why := ""
	manager, labelled := existing.Labels[LabelManagedBy]
	switch {
	case labelled && manager != ManagedByValue:
		why = fmt.Sprintf("label %s is %q, not %q", LabelManagedBy, decision.BoundMessage(manager), ManagedByValue)
	case existing.Labels[LabelPodUID] != want.Labels[LabelPodUID]:
		why = fmt.Sprintf("it names pod UID %q, not %q", decision.BoundMessage(existing.Labels[LabelPodUID]), want.Labels[LabelPodUID])
	case existing.Spec.PodName != want.Spec.PodName:
		why = fmt.Sprintf("it names pod %q, not %q", decision.BoundMessage(existing.Spec.PodName), want.Spec.PodName)
	case !labelled:
		if differs := unlabelledDiffers(existing, want); differs != "" {
			why = fmt.Sprintf("label %s is missing and %s", LabelManagedBy, differs)
		}
	}
	if why == "" {
		return nil
	}
	return &ForeignCRRError{Namespace: want.Namespace, Name: want.Name, Why: why}
}

// unlabelledDiffers names the first of our marks, besides the managed-by
// label, on which a CRR differs from the one we would have made; "" when
// none does.
func unlabelledDiffers(existing, want *kruisev1alpha1.ContainerRecreateRequest) string {
	deadline := func(c *kruisev1alpha1.ContainerRecreateRequest) string {
		if d := c.Spec.ActiveDeadlineSeconds; d != nil {
			return strconv.FormatInt(*d, 10)
		}
		return ""
	}
	for _, l := range []string{LabelAttempt, LabelStage} {
		if existing.Labels[l] != want.Labels[l] {
			return fmt.Sprintf("its label %s is %q, not %q", l, decision.BoundMessage(existing.Labels[l]), want.Labels[l])
		}
	}
	if got, w := podOwnerUID(existing), podOwnerUID(want); got != w {
		return fmt.Sprintf("it is owned by pod UID %q, not %q", decision.BoundMessage(got), w)
	}
	if got, w := deadline(existing), deadline(want); got != w {
		return fmt.Sprintf("its activeDeadlineSeconds is %q, not %q", got, w)
	}
	return ""
}

func podOwnerUID(c *kruisev1alpha1.ContainerRecreateRequest) string {
	for _, o := range c.OwnerReferences {
		if o.Kind == "Pod" && o.APIVersion == "v1" {
			return string(o.UID)
		}
	}
	return ""
}

// unlisted reports whether the controller's CRR informer, which lists by our
// managed-by label, never shows this CRR of ours: a policy stripped the label.
// Such a CRR is remembered as read live (confirm.go).
func unlisted(own *kruisev1alpha1.ContainerRecreateRequest) bool {
	return own.Labels[LabelManagedBy] != ManagedByValue
}

// newCRR builds the ContainerRecreateRequest for an action.
func (r *Reconciler) newCRR(pod *corev1.Pod, a decision.Action) *kruisev1alpha1.ContainerRecreateRequest {
	deadline := int64(decision.CRRDeadline(pod, r.cfg.Policy) / time.Second)
	// kruise-daemon's grace period, which kruise's webhook would default to
	// the pod's: written here so the deadline above is seen to cover it.
	grace := int64(decision.PodGrace(pod) / time.Second)
	// The CRR lives until its stop window closes, whatever the setting:
	// it is the evidence that a stop may be under way (decision/window.go).
	// A pod's own grace period sets it, so it is bounded to the field's type.
	ttl := int32(min(decision.CRRTTL(pod, r.cfg.Policy, r.cfg.CRRTTLAfterFinished)/time.Second, math.MaxInt32))
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
