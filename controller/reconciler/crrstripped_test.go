package reconciler

import (
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A policy engine strips our managed-by label from the CRRs it admits (issue
// 15). kruise-daemon acts on such a CRR all the same, so one that carries
// every other mark we write for that very attempt is ours; a CRR missing any
// of them (the foreign one of TestSyncDoesNotTakeAForeignCRRUnderItsNameForItsOwn
// carries only our pod UID label), or whose managed-by label names someone
// else, is not.
func TestCheckExistingCRRTakesOurOwnWithItsLabelStripped(t *testing.T) {
	pod := podtest.Pod("p").Namespace("ns").UID("uid-1").Container("main").Container("log", podtest.Env(decision.EnvTerminate, "true")).Build()
	r := New(DefaultConfig(), nil, nil, NoLiveReads{}, nil, nil, nil)
	want := r.newCRR(pod, decision.Action{Kind: decision.ActionCreateCRR, Containers: []string{"log"}, CRRName: decision.CRRName(pod, 1), Attempt: 1})
	stripped := func(f func(c *kruisev1alpha1.ContainerRecreateRequest)) *kruisev1alpha1.ContainerRecreateRequest {
		c := want.DeepCopy()
		delete(c.Labels, LabelManagedBy)
		f(c)
		return c
	}
	other := int64(5)
	for _, tc := range []struct {
		name     string
		existing *kruisev1alpha1.ContainerRecreateRequest
		own      bool
	}{
		{"stripped, every other mark ours", stripped(func(*kruisev1alpha1.ContainerRecreateRequest) {}), true},
		{"stripped, kruise's status and statusContext written", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) {
			c.Status.Phase = kruisev1alpha1.ContainerRecreateRequestRecreating
			c.Spec.Containers[0].StatusContext = &kruisev1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://1"}
		}), true},
		{"stripped, only our pod UID label", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) {
			c.Labels = map[string]string{LabelPodUID: string(pod.UID)}
			c.OwnerReferences, c.Spec.ActiveDeadlineSeconds = nil, nil
		}), false},
		{"stripped, another attempt", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[LabelAttempt] = "2" }), false},
		{"stripped, another stage", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[LabelStage] = "1" }), false},
		{"stripped, no owner", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.OwnerReferences = nil }), false},
		{"stripped, another deadline", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = &other }), false},
		{"stripped, another pod UID", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[LabelPodUID] = "uid-2" }), false},
		{"another manager, every other mark ours", stripped(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[LabelManagedBy] = "someone" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckExistingCRR(tc.existing, want)
			if tc.own != (err == nil) {
				t.Fatalf("CheckExistingCRR = %v, want own %v", err, tc.own)
			}
			if err == nil && !unlisted(tc.existing) {
				t.Errorf("an own CRR without our label must read as unlisted: the informer never shows it")
			}
		})
	}
}
