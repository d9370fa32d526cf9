package sim

import (
	"container/heap"
	"fmt"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// runUntil plays the simulator's events up to t.
func runUntil(s *Sim, t time.Time) {
	for len(s.events) > 0 && !s.events[0].at.After(t) {
		ev := heap.Pop(&s.events).(event)
		s.clock.SetTime(ev.at)
		ev.fn()
	}
	s.clock.SetTime(t)
}

// kruise-manager times a CRR's deadline, and its TTL after it finished, from
// that object's own fields: a CRR re-made under the name of one that failed
// and was deleted keeps its full deadline. (The simulator once let the first
// CRR's deadline timer fail the second 15 s after its creation, while its
// stop was under way, and the next CRR then landed inside the grace period:
// soak seed 2025, pod m-both-1956.)
func TestACRRRemadeUnderADeletedOnesNameKeepsItsOwnDeadline(t *testing.T) {
	s := New(Scenario{Name: "crr-timers", Faults: Faults{CRRTTL: time.Second}}, 1, Options{})
	e := &podEntry{node: &node{name: "virtual-0"}} // no daemon: only kruise-manager's timers run
	key := cache.ObjectName{Namespace: "ns", Name: "job-abc-st1"}
	create := func() *kruisev1alpha1.ContainerRecreateRequest {
		s.world.crrUIDs++
		crr := &kruisev1alpha1.ContainerRecreateRequest{}
		crr.Namespace, crr.Name = key.Namespace, key.Name
		crr.UID = types.UID(fmt.Sprintf("crr-test-%d", s.world.crrUIDs))
		deadline := int64(60)
		crr.Spec.ActiveDeadlineSeconds = &deadline
		s.world.updateCRR(crr)
		s.crrCreated(crr, e)
		return crr
	}

	create()
	runUntil(s, Epoch.Add(8*time.Second))
	s.finishCRR(key, kruisev1alpha1.ContainerRecreateRequestFailed, "simulated daemon failure")
	runUntil(s, Epoch.Add(10*time.Second))
	if _, ok := s.world.crrs[key]; ok {
		t.Fatal("the failed CRR was not deleted 1 s after it finished (CRRTTL)")
	}

	second := create() // at 10 s: its deadline is at 70 s, the first's was at 60 s
	runUntil(s, Epoch.Add(65*time.Second))
	got := s.world.crrs[key]
	if got == nil || got.UID != second.UID {
		t.Fatalf("the re-made CRR is gone at 65 s: a timer of the deleted one acted on it")
	}
	if crrFinished(got) {
		t.Fatalf("the re-made CRR, 55 s into its 60 s deadline, is %s (%s): the deleted CRR's deadline failed it", got.Status.Phase, got.Status.Message)
	}
	runUntil(s, Epoch.Add(70*time.Second+500*time.Millisecond)) // before the 1 s TTL deletes it
	if got := s.world.crrs[key]; got == nil || got.Status.Phase != kruisev1alpha1.ContainerRecreateRequestFailed {
		t.Fatalf("the re-made CRR did not fail at its own deadline (70 s): %+v", got)
	}
}
