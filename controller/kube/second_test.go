package kube

import (
	"context"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The trim keeps the one thing that tells OpenKruise's settle from ours,
// its condition's message, and no other condition message; the trimmed pod
// is decided as the full one.
func TestTrimPodKeepsKruisesSettleMessage(t *testing.T) {
	build := func(msg string) *corev1.Pod {
		pod := podtest.Pod("p").Node("n").Phase(corev1.PodSucceeded).
			ConditionAt(decision.ConditionSidecarTerminated, corev1.ConditionTrue, podtest.Epoch).
			Condition(corev1.PodReady, corev1.ConditionFalse).
			Container("main", podtest.Exited(0, podtest.Epoch)).
			Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvIgnoreExitCode, "true"), podtest.Running()).Build()
		pod.Status.Conditions[0].Message = msg
		pod.Status.Conditions[1].Message = "containers with unready status: [proxy]"
		return pod
	}
	for _, tc := range []struct {
		msg         string
		keep, kruis bool
	}{
		{decision.KruiseSettleMessage, true, true},
		{"the main containers are done; the phase was settled before stopping the ignore-exit-code sidecars", false, false},
	} {
		full := build(tc.msg)
		obj, err := TrimPod(full.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		trimmed := obj.(*corev1.Pod)
		if got := trimmed.Status.Conditions[0].Message != ""; got != tc.keep || trimmed.Status.Conditions[1].Message != "" {
			t.Errorf("message %q: kept %t, want %t; other condition's message %q", tc.msg, got, tc.keep, trimmed.Status.Conditions[1].Message)
		}
		if decision.SettledByKruise(trimmed) != tc.kruis || decision.SettledByKruise(full) != tc.kruis {
			t.Errorf("message %q: settled by kruise: trimmed %t full %t, want %t", tc.msg, decision.SettledByKruise(trimmed), decision.SettledByKruise(full), tc.kruis)
		}
	}
}

// kruise's CRR is read by its name, and only one the pod owns counts: a
// CRR someone made by hand under that name is not kruise's terminator.
func TestKruiseTerminatorCRRIsReadByNameAndOwner(t *testing.T) {
	pod := podtest.Pod("p").UID("u-1").Build()
	other := podtest.Pod("q").UID("u-2").Build()
	crr := func(p *corev1.Pod, owner types.UID) *kruisev1alpha1.ContainerRecreateRequest {
		return &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{
			Name: decision.KruiseTerminatorCRRName(p), Namespace: p.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: owner}}}}
	}
	client := kruisefake.NewSimpleClientset(crr(pod, "u-1"), crr(other, "someone-else"))
	read := Writer{Kruise: client}
	ctx := context.Background()
	got, err := read.KruiseTerminatorCRR(ctx, pod)
	if err != nil || got == nil || got.Name != "sidecar-termination-u-1" {
		t.Errorf("kruise's CRR for the pod: %v, %v", got, err)
	}
	if got, err := read.KruiseTerminatorCRR(ctx, other); err != nil || got != nil {
		t.Errorf("a CRR the pod does not own counted: %v, %v", got, err)
	}
	if got, err := read.KruiseTerminatorCRR(ctx, podtest.Pod("r").UID("u-3").Build()); err != nil || got != nil {
		t.Errorf("none: %v, %v", got, err)
	}
}
