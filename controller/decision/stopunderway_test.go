package decision_test

import (
	"testing"
	"time"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A CRR that kruise-daemon took up just before its deadline: the daemon
// stops the container with the pod's grace period (30 s here) and marks it
// killed only when that returns, and kruise-manager completing the CRR at its
// deadline does not cut it short. The fallback (here a swap) waits until the
// stop can have ended, so no second stop lands while the sidecar drains.
func TestAStopUnderWayIsWaitedFor(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	deadline := exitAt.Add(time.Minute)
	crr := func(phase string, states ...CRRContainerState) CRR {
		c := CRR{Name: CRRName(pod, 1), Attempt: 1, Containers: []string{"log"}, Phase: phase, States: states,
			Deadline: time.Minute, Created: exitAt}
		if c.Finished() {
			c.Completed = deadline
		}
		return c
	}
	stopping := CRRContainerState{Name: "log", Phase: "Pending"}
	killed := CRRContainerState{Name: "log", Phase: "Recreating", Killed: true}
	swap := []Action{swapOf(1, "log", img("log"))}
	for name, tc := range map[string]struct {
		crr  CRR
		at   time.Time
		want want
	}{
		"taken up before its deadline, not yet killed: wait out the grace period": {
			crr: crr("Completed", stopping), at: deadline.Add(time.Second),
			want: want{verdict: VerdictInProgress, requeue: 30*time.Second + 10*time.Second - time.Second}},
		"taken up before its deadline, grace period over and still running: failed kill, swap": {
			crr: crr("Completed", stopping), at: deadline.Add(40 * time.Second),
			want: want{verdict: VerdictAct, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}, actions: swap}},
		"killed by kruise-daemon and running: failed kill, swap at once": {
			crr: crr("Completed", killed), at: deadline.Add(time.Second),
			want: want{verdict: VerdictAct, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}, actions: swap}},
		"never taken up, completed at its deadline: failed kill, swap at once": {
			crr: crr("Completed"), at: deadline.Add(time.Second),
			want: want{verdict: VerdictAct, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}, actions: swap}},
		"past its deadline, its completion not seen yet: wait its stop window out (a pickup just before the deadline)": {
			crr: crr(""), at: deadline.Add(time.Second),
			want: want{verdict: VerdictInProgress, requeue: 39 * time.Second}},
		"past its stop window, still not completed (kruise-manager down): failed kill, swap": {
			crr: crr(""), at: deadline.Add(40 * time.Second),
			want: want{verdict: VerdictAct, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}, actions: swap}},
	} {
		t.Run(name, func(t *testing.T) {
			checkPlan(t, tc.want, Decide(Input{Pod: pod, Node: normal, CRRAPI: true, CRRs: []CRR{tc.crr}, Now: tc.at, Policy: DefaultPolicy()}))
		})
	}
}
