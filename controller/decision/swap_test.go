package decision_test

import (
	"testing"
	"time"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A swapped sidecar that has not terminated is followed through: within the
// pod's grace plus the start allowance it is the stop under way; at that
// bound exactly it is called stuck, with a Warning.
func TestASwappedSidecarIsStuckAtExactlyTheBound(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, podtest.Image(quickExit), podtest.Running()).Build()
	swapped := exitAt.Add(time.Second)
	bound := 30*time.Second + DefaultPolicy().SwapStartAllowance
	for _, tc := range []struct {
		at    time.Duration
		stuck bool
	}{{bound - time.Second, false}, {bound, true}} {
		p := Decide(Input{Pod: pod, Node: virtual, CRRAPI: true, Now: swapped.Add(tc.at), Policy: DefaultPolicy(),
			SwappedAt: map[string]time.Time{"log": swapped}})
		stuck := false
		for _, pr := range p.Problems {
			stuck = stuck || pr.Reason == ReasonQuickExitNotRunning
		}
		if stuck != tc.stuck || p.RequeueAfter <= 0 {
			t.Errorf("%s after the swap: stuck %v (problems %+v), requeue %s; want stuck %v and a requeue", tc.at, stuck, p.Problems, p.RequeueAfter, tc.stuck)
		}
	}
}

// The start allowance is the policy's, or the default when the policy
// leaves it unset (zero).
func TestSwapStartAllowanceIsThePolicysOrTheDefault(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, podtest.Image(quickExit), podtest.Running()).Build()
	swapped := exitAt.Add(time.Second)
	for _, tc := range []struct {
		allowance time.Duration
		at        time.Duration
		stuck     bool
	}{
		{0, 30*time.Second + DefaultPolicy().SwapStartAllowance - time.Second, false},
		{0, 30*time.Second + DefaultPolicy().SwapStartAllowance, true},
		{10 * time.Second, 39 * time.Second, false},
		{10 * time.Second, 40 * time.Second, true},
	} {
		policy := DefaultPolicy()
		policy.SwapStartAllowance = tc.allowance
		p := Decide(Input{Pod: pod, Node: virtual, CRRAPI: true, Now: swapped.Add(tc.at), Policy: policy,
			SwappedAt: map[string]time.Time{"log": swapped}})
		stuck := false
		for _, pr := range p.Problems {
			stuck = stuck || pr.Reason == ReasonQuickExitNotRunning
		}
		if stuck != tc.stuck {
			t.Errorf("allowance %s, %s after the swap: stuck %v, want %v", tc.allowance, tc.at, stuck, tc.stuck)
		}
	}
}
