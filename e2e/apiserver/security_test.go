package apiserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

const attackerImage = "attacker.example.com/payload:latest"

// TestOnlyAllowedImagesAreSwappedIn is the first finding of the security
// review: with the binary's own defaults (no allowlist flag), a pod author
// who names an image in the env or in the pod annotation gets a Warning
// naming the allowlist, and no patch; the project's quick-exit image is
// still swapped in.
func TestOnlyAllowedImagesAreSwappedIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true, binaryDefaults)
	e.createNode(t, ctx, "virtual-1", map[string]string{"type": "virtual-kubelet"})

	byEnv := e.createPod(t, ctx, jobPod("attacker-env", "virtual-1", true,
		corev1.EnvVar{Name: decision.EnvTerminateWithImage, Value: attackerImage}))
	annotated := jobPod("attacker-annotation", "virtual-1", true)
	annotated.Annotations = map[string]string{decision.AnnotationSidecars: "sidecar", decision.AnnotationQuickExitImage: attackerImage}
	byAnnotation := e.createPod(t, ctx, annotated)
	allowed := e.createPod(t, ctx, jobPod("allowed", "virtual-1", true, envImage))

	waitUntil(t, ctx, "the swap of the allowed pod", func(ctx context.Context) (bool, error) {
		p, err := e.kube.CoreV1().Pods("default").Get(ctx, allowed.Name, metav1.GetOptions{})
		return err == nil && p.Spec.Containers[1].Image == quickExit, err
	})
	e.waitForEvent(t, ctx, allowed, "Normal "+reconciler.ReasonTerminated)
	for _, pod := range []*corev1.Pod{byEnv, byAnnotation} {
		e.waitForEvent(t, ctx, pod, "Warning "+decision.ReasonQuickExitImageNotAllowed)
		msg := eventMessage(t, ctx, e, pod, decision.ReasonQuickExitImageNotAllowed)
		if !strings.Contains(msg, decision.DefaultQuickExitRepository) {
			t.Errorf("%s: the Warning does not name the allowlist: %q", pod.Name, msg)
		}
		p, err := e.kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := p.Spec.Containers[1].Image; img != "example.com/sidecar:1" {
			t.Errorf("%s: sidecar image is %s", pod.Name, img)
		}
	}
	writes := e.controllerWrites(t)
	for _, w := range writes {
		if strings.Contains(w, "attacker-") {
			t.Errorf("the controller wrote to an attacker's pod: %s", w)
		}
	}
	if !slices.Contains(writes, "patch pods allowed 200") {
		t.Errorf("no swap of the allowed pod among the controller's writes %v", writes)
	}
	t.Logf("controller writes: %v", writes)
}

// eventMessage returns the message of the pod's event with this reason.
func eventMessage(t *testing.T, ctx context.Context, e *env, pod *corev1.Pod, reason string) string {
	t.Helper()
	list, err := e.kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Reason == reason {
			return ev.Message
		}
	}
	t.Fatalf("%s: no %s event", pod.Name, reason)
	return ""
}
