package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// TestTrimCapsValuesReadFromThePod: the cache keeps at most one byte over
// the bound of each value a pod author controls, enough for the decision to
// see it is too long.
func TestTrimCapsValuesReadFromThePod(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	pod := podtest.Pod("p").Annotate(decision.AnnotationSidecars, huge).Annotate(decision.AnnotationQuickExitImage, huge).
		Container("main", podtest.Image(huge), podtest.Waiting("ErrImagePull", nil)).
		Container("side", podtest.Env(decision.EnvTerminate, huge), podtest.Env(decision.EnvTerminateWithImage, huge)).Build()
	pod.Status.ContainerStatuses[0].State.Waiting.Message = huge
	obj, err := TrimPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Pod)
	values := []string{got.Annotations[decision.AnnotationSidecars], got.Annotations[decision.AnnotationQuickExitImage],
		got.Spec.Containers[0].Image, got.Spec.Containers[1].Env[0].Value, got.Spec.Containers[1].Env[1].Value}
	for i, v := range values {
		if len(v) != decision.MaxValueLen+1 || !decision.TooLong(v) {
			t.Errorf("value %d kept %d bytes, want %d", i, len(v), decision.MaxValueLen+1)
		}
	}
	if w := got.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ErrImagePull" || w.Message != "" {
		t.Errorf("waiting state kept as %+v", w)
	}
	short := podtest.Pod("q").Container("side", podtest.Env(decision.EnvTerminate, "true")).Build()
	obj, _ = TrimPod(short.DeepCopy())
	if v := obj.(*corev1.Pod).Spec.Containers[0].Env[0].Value; v != "true" {
		t.Errorf("a short value became %q", v)
	}
}
