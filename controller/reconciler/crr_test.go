package reconciler

import (
	"errors"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

func TestCheckExistingCRRAcceptsOnlyOurOwnForThePod(t *testing.T) {
	want := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-st1",
			Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelPodUID: "uid-1", LabelAttempt: "1"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p"},
	}
	edit := func(f func(c *kruisev1alpha1.ContainerRecreateRequest)) *kruisev1alpha1.ContainerRecreateRequest {
		c := want.DeepCopy()
		f(c)
		return c
	}
	for _, tc := range []struct {
		name     string
		existing *kruisev1alpha1.ContainerRecreateRequest
		own      bool
	}{
		{"the same CRR", want.DeepCopy(), true},
		{"ours, a later status", edit(func(c *kruisev1alpha1.ContainerRecreateRequest) {
			c.Status.Phase = kruisev1alpha1.ContainerRecreateRequestCompleted
		}), true},
		{"no labels", edit(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels = nil }), false},
		{"another manager", edit(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[LabelManagedBy] = "someone" }), false},
		{"another pod UID", edit(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[LabelPodUID] = "uid-2" }), false},
		{"another pod name", edit(func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "q" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckExistingCRR(tc.existing, want)
			if tc.own != (err == nil) {
				t.Fatalf("CheckExistingCRR = %v, want own %v", err, tc.own)
			}
			if err == nil {
				return
			}
			var foreign *ForeignCRRError
			if !errors.As(err, &foreign) {
				t.Fatalf("error %T, want *ForeignCRRError", err)
			}
			out, r := classify(err, decision.Action{Kind: decision.ActionCreateCRR, Attempt: 1})
			if out != outcomeRefused || !r.Permanent || r.Code != 409 {
				t.Errorf("classified as %v %+v, want a permanent 409 refusal", out, r)
			}
		})
	}
}
