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

// A pod deleted and made again under its name (a new UID) while the echo of
// the old pod's swap is still noted: the note is the old pod's, in the old
// pod's memory. The new pod's events are never taken for that echo, even
// one that looks exactly like it (the same swap, on the new pod); once the
// new pod is synced its memory replaces the old one, the old note with it,
// so the old pod's late echo is no longer dropped either; and the new pod's
// own swap is noted afresh, its echo dropped once like any other.
func TestAPodReplacedUnderItsNameIsNeverTakenForTheOldPodsEcho(t *testing.T) {
	build := func(uid string) *corev1.Pod {
		return podtest.Pod("p").UID(uid).Node("vk").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
			Container("log", podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
	}
	a, r, metrics := newAPI(t, build("uid-1"))
	key := cache.ObjectName{Namespace: "default", Name: "p"}
	if _, err := r.Sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if len(a.writes) != 1 {
		t.Fatalf("want the old pod's swap, got %v", a.writes)
	}
	oldBefore, oldEcho := a.cachedPods["p"], a.pods["p"].DeepCopy()

	// The old pod is replaced before its echo came, and before the key's
	// next sync.
	a.pods["p"] = build("uid-2")
	a.catchUp()
	fresh := a.cachedPods["p"]
	swappedLikeTheOld := fresh.DeepCopy()
	swappedLikeTheOld.Spec.Containers[1].Image = quickExit
	if !r.PodUpdateMatters(fresh, swappedLikeTheOld) {
		t.Error("the new pod's update that looks like the old pod's swap was dropped as its echo")
	}
	if !r.PodUpdateMatters(oldBefore, fresh) {
		t.Error("the update from the old pod to the new one (a relist) was dropped")
	}

	if _, err := r.Sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if len(a.writes) != 2 {
		t.Fatalf("want the new pod's own swap, got %v", a.writes)
	}
	if !r.PodUpdateMatters(oldBefore, oldEcho) {
		t.Error("the old pod's echo dropped after the new pod's sync: its note outlived its memory")
	}
	newEcho := a.pods["p"].DeepCopy()
	if r.PodUpdateMatters(fresh, newEcho) {
		t.Error("the new pod's own swap's echo queued: its note was not made")
	}
	if !r.PodUpdateMatters(fresh, newEcho) {
		t.Error("the new pod's echo dropped twice: it is dropped once")
	}
	if got := testutil.ToFloat64(metrics.PodsTracked); got != 1 {
		t.Errorf("pods tracked %v, want 1: the new pod, the old one's memory gone", got)
	}
}

// The wake that follows a pod's own end (its write's expectation timer)
// finds a pod the decision does not consider and nothing remembered of it:
// the sync reads nothing and decides nothing. A pod that ended otherwise
// (Failed, still remembered) is synced once, which forgets it; the wake
// after that is passed over in turn.
func TestAWakeOfAPodItNoLongerRemembersReadsNothing(t *testing.T) {
	for name, phase := range map[string]corev1.PodPhase{
		"Succeeded by itself": corev1.PodSucceeded,
		"Failed":              corev1.PodFailed,
	} {
		t.Run(name, func(t *testing.T) {
			pod := podtest.Pod("p").Node("vk").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
				Container("log", podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
			a, r, metrics := newAPI(t, pod)
			key := cache.ObjectName{Namespace: "default", Name: "p"}
			if _, err := r.Sync(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			if len(a.writes) != 1 {
				t.Fatalf("want one swap, got %v", a.writes)
			}
			echo := a.pods["p"].DeepCopy()
			end := echo.DeepCopy()
			end.Status.Phase = phase
			end.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
			r.PodUpdateMatters(echo, end) // the handler: forgets a pod that Succeeded by itself
			a.pods["p"] = end
			a.catchUp()

			decided := func() float64 {
				var n float64
				for _, v := range []decision.Verdict{decision.VerdictIgnored, decision.VerdictNoSidecars} {
					n += testutil.ToFloat64(metrics.Decisions.WithLabelValues(string(v)))
				}
				return n
			}
			wake := func() (reads int, decisions float64) {
				reads, decisions = a.podReads, decided()
				if after, err := r.Sync(context.Background(), key); err != nil || after != 0 {
					t.Fatalf("wake: look again after %v, err %v; want neither", after, err)
				}
				return a.podReads - reads, decided() - decisions
			}
			if phase == corev1.PodFailed {
				if !decision.Considered(pod) || decision.Considered(end) {
					t.Fatal("the test's pod must be considered before its end and not after")
				}
				if reads, decisions := wake(); reads != 1 || decisions != 1 {
					t.Errorf("the remembered pod's wake read the pod %d times and decided %v times; want one sync", reads, decisions)
				}
			}
			if reads, decisions := wake(); reads != 0 || decisions != 0 {
				t.Errorf("the wake of a pod not remembered read the pod %d times and decided %v times; want none", reads, decisions)
			}
			if len(a.writes) != 1 {
				t.Errorf("writes %v, want the one swap", a.writes)
			}
			if got := testutil.ToFloat64(metrics.PodsTracked); got != 0 {
				t.Errorf("pods tracked %v, want 0", got)
			}
		})
	}
}
