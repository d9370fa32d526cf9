package app

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

type recorded struct {
	mu  sync.Mutex
	got map[string][]string // pod name -> messages
}

func (r *recorded) Event(obj runtime.Object, _, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := obj.(*corev1.Pod)
	r.got[p.Name] = append(r.got[p.Name], reason+": "+message)
}

// recoverQuickExit is an image the default allowlist allows.
const recoverQuickExit = decision.DefaultQuickExitRepository + ":1"

func recoverPod(name string, image string, state corev1.ContainerState) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.Containers = []corev1.Container{
		{Name: "main", Image: "work"},
		{Name: "proxy", Image: image, Env: []corev1.EnvVar{{Name: decision.EnvTerminateWithImage, Value: recoverQuickExit}}},
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: "proxy", State: state},
	}
	return p
}

// An earlier instance's CRR or swap whose pod has no SidecarTerminating event
// gets one; pods that have theirs, untouched pods and actions older than the
// window get none.
func TestRecoverEventsOfEarlierActions(t *testing.T) {
	now := time.Now()
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	longAgo := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now.Add(-2 * recoverWindow))}}
	pods := []*corev1.Pod{
		recoverPod("crr-no-event", "proxy:1", running),
		recoverPod("crr-with-event", "proxy:1", running),
		recoverPod("crr-old", "proxy:1", running),
		recoverPod("swapped-no-event", recoverQuickExit, running),
		recoverPod("swapped-long-ago", recoverQuickExit, longAgo),
		recoverPod("untouched", "proxy:1", running),
	}
	crr := func(pod string, age time.Duration) *kruisev1alpha1.ContainerRecreateRequest {
		c := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: pod + "-crr", Namespace: "ns",
			CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		c.Spec.Containers = []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "proxy"}}
		return c
	}
	crrs := map[string][]*kruisev1alpha1.ContainerRecreateRequest{
		"crr-no-event":   {crr("crr-no-event", time.Minute)},
		"crr-with-event": {crr("crr-with-event", time.Minute)},
		"crr-old":        {crr("crr-old", 2*recoverWindow)},
	}
	actions := earlierActions(pods, func(p *corev1.Pod) []*kruisev1alpha1.ContainerRecreateRequest { return crrs[p.Name] },
		decision.DefaultPolicy(), now)

	client := fake.NewClientset(&corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "crr-with-event", UID: "uid-crr-with-event"},
		Reason:         reconciler.ReasonTerminated, Source: corev1.EventSource{Component: eventSource},
	})
	rec := &recorded{got: map[string][]string{}}
	n, err := recoverEvents(context.Background(), client, rec, actions)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(rec.got) != 2 {
		t.Fatalf("recorded %d events, on %v; want 2, on crr-no-event and swapped-no-event", n, rec.got)
	}
	if m := rec.got["crr-no-event"]; len(m) != 1 || !strings.Contains(m[0], "crr-no-event-crr") || !strings.HasPrefix(m[0], reconciler.ReasonTerminated) {
		t.Errorf("crr-no-event: %v", m)
	}
	if m := rec.got["swapped-no-event"]; len(m) != 1 || !strings.Contains(m[0], recoverQuickExit) {
		t.Errorf("swapped-no-event: %v", m)
	}
}
