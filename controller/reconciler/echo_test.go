package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The pod update that only echoes the reconciler's own swap is dropped,
// once, on the happy path; a pod whose stops come in steps (a stop order)
// keeps its echo, whose sync plans the next step. A pod that then Succeeds
// by itself is forgotten without a sync.
func TestTheEchoOfItsOwnSwapIsDroppedOnlyOnTheHappyPath(t *testing.T) {
	for name, tc := range map[string]struct {
		stopOrder bool
		dropped   bool
	}{
		"a plain sidecar": {false, true},
		"a stop order":    {true, false},
	} {
		t.Run(name, func(t *testing.T) {
			b := podtest.Pod("p").Node("vk").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
				Container("log", podtest.Env(decision.EnvTerminateWithImage, quickExit))
			if tc.stopOrder {
				// The proxy stops after the log shipper: its swap is planned
				// once the cache shows the shipper's.
				b = b.Container("proxy", podtest.Env(decision.EnvTerminateWithImage, quickExit)).
					Annotate(decision.AnnotationStopOrder, "log,proxy")
			}
			a, r, metrics := newAPI(t, b.Build())
			if _, err := r.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "p"}); err != nil {
				t.Fatal(err)
			}
			if len(a.writes) != 1 {
				t.Fatalf("want one swap, got %v", a.writes)
			}
			old, echo := a.cachedPods["p"], a.pods["p"].DeepCopy()
			if got := r.PodUpdateMatters(old, echo); got == tc.dropped {
				t.Errorf("the swap's echo queued: %v, want %v", got, !tc.dropped)
			}
			if !r.PodUpdateMatters(old, echo) {
				t.Error("the same echo dropped twice: it is dropped once")
			}

			done := echo.DeepCopy()
			done.Status.Phase = corev1.PodSucceeded
			done.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
			if r.PodUpdateMatters(echo, done) {
				t.Error("the pod's own end queued: it needs no sync")
			}
			if got := testutil.ToFloat64(metrics.PodsTracked); got != 0 {
				t.Errorf("pods tracked after the pod's end: %v, want 0 (forgotten)", got)
			}
		})
	}
}

// What the echo filter remembers of a pod is forgotten with the pod: once a
// sync finds the pod gone, an update that looks like the echo of its last
// swap is no longer taken for it (the note lives in the pod's memory, and
// goes with it).
func TestForgettingAPodForgetsTheEchoOfItsWrite(t *testing.T) {
	pod := podtest.Pod("p").Node("vk").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("log", podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
	a, r, _ := newAPI(t, pod)
	key := cache.ObjectName{Namespace: "default", Name: "p"}
	if _, err := r.Sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if len(a.writes) != 1 {
		t.Fatalf("want one swap, got %v", a.writes)
	}
	old, echo := a.cachedPods["p"], a.pods["p"].DeepCopy()
	delete(a.cachedPods, "p")
	if _, err := r.Sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if !r.PodUpdateMatters(old, echo) {
		t.Error("the swap's echo dropped after the pod was forgotten: its note outlived the pod")
	}
}
