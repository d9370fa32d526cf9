package kube

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

func orderedPod(opts ...podtest.Option) *podtest.Builder {
	return podtest.Pod("ordered").Annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("fluent-bit", append([]podtest.Option{podtest.Env(decision.EnvTerminateWithImage, quickExit)}, opts...)...).
		Container("istio-proxy", podtest.Env(decision.EnvTerminateWithImage, quickExit))
}

// The order and the stage mark survive the informer's trim: the decision is
// the same on the trimmed pod.
func TestTrimKeepsTheStopOrder(t *testing.T) {
	full := orderedPod(podtest.Image(quickExit)).Annotate(decision.AnnotationStopStage, "1 2026-01-01T00:00:11Z").Annotate("unrelated", "x").Build()
	obj, _ := TrimPod(full.DeepCopy())
	trimmed := obj.(*corev1.Pod)
	in := func(p *corev1.Pod) decision.Input {
		return decision.Input{Pod: p, Node: decision.Node{Name: "node-1", Found: true, Virtual: true}, CRRAPI: true,
			Now: podtest.Epoch.Add(20 * time.Second), Policy: decision.DefaultPolicy()}
	}
	plan := decision.Decide(in(trimmed))
	if diff := cmp.Diff(decision.Decide(in(full)), plan); diff != "" {
		t.Errorf("the decision differs on the trimmed pod (-full +trimmed):\n%s", diff)
	}
	if plan.Stage == nil || plan.Stage.Stage != 1 || plan.Stage.Until.IsZero() {
		t.Errorf("trimmed pod: stage %+v, want stage 1 with its bound from the mark", plan.Stage)
	}
}

// Through the real Writer: a swap that starts a stage records the stage in the
// same patch; a stage's CRR carries the stage label the next sync reads back.
func TestStageWritesCarryTheStage(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{orderedPod().Build()}, virtualNode)
	f.sync("ordered")
	server, err := f.client.CoreV1().Pods("default").Get(context.Background(), "ordered", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := server.Annotations[decision.AnnotationStopStage]; got != "1 2026-01-01T00:00:11Z" {
		t.Errorf("stop-stage annotation = %q, want stage 1 at the swap's time", got)
	}
	if server.Spec.Containers[1].Image != quickExit || server.Spec.Containers[2].Image == quickExit {
		t.Errorf("want only fluent-bit swapped, got images %s, %s", server.Spec.Containers[1].Image, server.Spec.Containers[2].Image)
	}

	crrPod := podtest.Pod("ordered-crr").Annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("fluent-bit", podtest.Env(decision.EnvTerminate, "true")).Container("istio-proxy", podtest.Env(decision.EnvTerminate, "true")).Build()
	f = newFixture(t, []*corev1.Pod{crrPod}, normalNode)
	f.sync("ordered-crr")
	crr, err := f.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(context.Background(), decision.StageCRRName(crrPod, 1, 1), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("stage 1's CRR: %v", err)
	}
	if crr.Labels[reconciler.LabelStage] != "1" || len(crr.Spec.Containers) != 1 || crr.Spec.Containers[0].Name != "fluent-bit" {
		t.Errorf("stage 1's CRR: labels %v, containers %+v", crr.Labels, crr.Spec.Containers)
	}
}
