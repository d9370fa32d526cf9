package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Two replicas write for a moment while leadership moves. These tests are
// the soak's seeds 140 and 460 of the 10^6-pod run at be471e5: a replica
// whose pod informer is ahead of its CRR informer must not act on a view that
// hides the other replica's CRR.

// otherReplicasCRR is stage's CRR for containers as another replica made it.
func otherReplicasCRR(pod *podtest.Builder, name string, stage int, made time.Time, containers ...string) *kruisev1alpha1.ContainerRecreateRequest {
	p := pod.Build()
	crr := stageCRR(name, stage, containers...)
	crr.Labels[reconciler.LabelManagedBy], crr.Labels[reconciler.LabelPodUID] = reconciler.ManagedByValue, string(p.UID)
	crr.Spec.PodName = p.Name
	crr.CreationTimestamp = metav1.NewTime(made)
	return crr
}

// Seed 140: the other replica issued stage 1 (its mark is on the pod, its
// CRR in flight); this replica's cache shows the mark and the shipper
// stopped, not the CRR. Before it makes stage 2's CRR it reads stage 1's
// live, and does not leave stage 2's beside it in flight.
func TestAStageMarkFromAnotherReplicaIsFollowedByItsCRRBeforeTheNextStage(t *testing.T) {
	issued := podtest.Epoch.Add(11 * time.Second)
	build := shipperPod(podtest.Exited(0, podtest.Epoch.Add(12*time.Second))).
		Annotate(decision.AnnotationStopStage, "1 "+issued.UTC().Format(time.RFC3339))
	pod := build.Build()
	st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	w.live[st1] = otherReplicasCRR(build, st1, 1, issued, "fluent-bit")
	f := newFixtureLive(w.world, w)
	f.clock.SetTime(podtest.Epoch.Add(13 * time.Second))
	f.sync(t)
	if !strings.Contains(strings.Join(w.reads, ","), st1) {
		t.Errorf("live reads %v, want %s read before stage 2's CRR is made", w.reads, st1)
	}
	if got, want := strings.Join(w.sent, ","), "delete "+st1+",crr "+st2; got != want {
		t.Fatalf("writes %s, want %s: stage 1's CRR, unseen by the cache, ended before stage 2's is made", got, want)
	}
}

// Seed 460: this replica's create of the shipper's CRR is refused (HTTP
// 500) and its fallback swap meets a conflict; meanwhile the other replica
// makes that CRR, and kruise-daemon stops the shipper. This replica's cache
// does not show the CRR; before it swaps the image it reads the refused name
// live, and does not stop the shipper a second time within its grace period.
func TestASwapAfterARefusedCRRWaitsForTheCRRAnotherReplicaMade(t *testing.T) {
	build := podtest.Pod("p").Annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("fluent-bit", markCRR, markImage, podtest.Running()).Container("istio-proxy", markCRR)
	pod := build.Build()
	st1 := decision.StageCRRName(pod, 1, 1)
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	w.answers["crr "+st1] = []error{apierrors.NewInternalError(errors.New("simulated"))}
	w.answers["swap"] = []error{apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, pod.Name, errors.New("simulated"))}
	f := newFixtureLive(w.world, w)
	f.clock.SetTime(podtest.Epoch.Add(11 * time.Second))
	if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}); !apierrors.IsConflict(err) {
		t.Fatalf("first sync: %v, want the swap's conflict", err)
	}
	first := strings.Join(w.sent, ",")
	if !strings.Contains(first, "crr "+st1) {
		t.Fatalf("first sync: writes %s, want the stage 1 CRR tried", first)
	}
	w.sent = nil
	w.live[st1] = otherReplicasCRR(build, st1, 1, f.clock.Now().Add(500*time.Millisecond), "fluent-bit")
	f.clock.Step(5 * time.Second)
	f.sync(t)
	for _, s := range w.sent {
		if s == "swap" {
			t.Fatalf("writes %v after %s: the shipper swapped while the CRR another replica made stops it", w.sent, first)
		}
	}
	if !strings.Contains(strings.Join(w.reads, ","), st1) {
		t.Errorf("live reads %v, want %s read before the swap", w.reads, st1)
	}
}

// Soak seed 1061: the first attempt's CRR is known here from memory only
// (a policy stripped our label, so the cache never lists it; kruise deleted
// it after it failed). Another replica, whose view had neither that CRR nor
// an attempt count, makes the first attempt again under the same name.
// Before this replica makes attempt 2 it reads attempt 1's name live, finds
// a CRR made after the one it remembers, in flight, and does not make
// attempt 2 beside it.
func TestASecondAttemptWaitsForAFirstAttemptAnotherReplicaMadeAgain(t *testing.T) {
	build := podtest.Pod("p").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("log", markCRR, podtest.Running())
	pod := build.Build()
	// A grace period longer than the expectation timeout: the first CRR is
	// read live, and remembered, before its deadline passes.
	grace := int64(120)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	st1, st2 := decision.CRRName(pod, 1), decision.CRRName(pod, 2)
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
	stripped := func(made time.Time) *kruisev1alpha1.ContainerRecreateRequest {
		crr := stageCRR(st1, 0, "log")
		crr.Labels = map[string]string{reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: "1"}
		crr.Spec.PodName = pod.Name
		crr.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
		d := int64(decision.CRRDeadline(pod, decision.DefaultPolicy()) / time.Second)
		crr.Spec.ActiveDeadlineSeconds = &d
		crr.CreationTimestamp = metav1.NewTime(made)
		return crr
	}
	syncAt := func(at time.Time) {
		t.Helper()
		f.clock.SetTime(at)
		if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	made := podtest.Epoch.Add(11 * time.Second)
	syncAt(made)
	if got := strings.Join(w.sent, ","); got != "crr "+st1 {
		t.Fatalf("first sync: writes %s, want crr %s", got, st1)
	}
	// The cache never shows it: past the expectation timeout it is read
	// live, label stripped, and remembered.
	w.live[st1] = stripped(made)
	syncAt(made.Add(reconciler.DefaultConfig().ExpectationTimeout + time.Second))
	if got := strings.Join(w.sent, ","); got != "crr "+st1 {
		t.Fatalf("after the expectation timeout: writes %s, want only the first crr %s", got, st1)
	}
	// Kruise deletes it after it failed; past its deadline, the other
	// replica makes it again a second before this one looks.
	delete(w.live, st1)
	w.sent = nil
	later := made.Add(5 * time.Minute)
	w.live[st1] = stripped(later.Add(-time.Second))
	syncAt(later)
	for _, s := range w.sent {
		if s == "crr "+st2 {
			t.Fatalf("writes %v: attempt 2 made while attempt 1, made again by another replica, is in flight", w.sent)
		}
	}
	if !strings.Contains(strings.Join(w.reads, ","), st1) {
		t.Errorf("live reads %v, want %s read before attempt 2", w.reads, st1)
	}
}

// Soak seed 313: the other replica found the shipper's stage held up (still
// running past its grace period), deleted stage 1's CRR and made stage 2's,
// with the shipper carried into it. This replica's caches show neither write:
// the pod with no mark, no CRR at all. Before it makes stage 1's CRR it reads
// stage 2's name live, finds it in flight, and does not make stage 1's beside
// it.
func TestAStageCRRIsNotMadeBesideALaterStagesCRRAnotherReplicaMade(t *testing.T) {
	build := shipperPod(podtest.Running())
	pod := build.Build()
	st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	later := otherReplicasCRR(build, st2, 2, podtest.Epoch.Add(52*time.Second), "fluent-bit", "istio-proxy")
	later.Labels[reconciler.LabelStage] = "2"
	w.live[st2] = later
	f := newFixtureLive(w.world, w)
	f.clock.SetTime(podtest.Epoch.Add(53 * time.Second))
	f.sync(t)
	if !strings.Contains(strings.Join(w.reads, ","), st2) {
		t.Errorf("live reads %v, want %s read before stage 1's CRR is made", w.reads, st2)
	}
	for _, s := range w.sent {
		if s == "crr "+st1 {
			t.Fatalf("writes %v: stage 1's CRR made beside stage 2's, which another replica made and kruise-daemon serves", w.sent)
		}
	}
	if len(w.sent) != 0 {
		t.Errorf("writes %v, want none while stage 2's CRR is in flight", w.sent)
	}
}
