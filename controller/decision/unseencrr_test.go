package decision_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A CRR the cache no longer shows, or never did (deleted with its CRD, its
// label stripped by a policy), is given as last seen (Unseen). Its status no
// longer moves, so kruise-manager's completion at its deadline, with the
// states that show a stop under way, is never seen: a stop kruise-daemon
// began as late as the deadline may still run a grace period (30 s here)
// past it, and no swap lands before that, whether or not the CRR API is
// still served.
func TestAnUnseenCRRIsWaitedForItsDeadlineAndAGracePeriod(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	deadline := exitAt.Add(time.Minute)
	crr := func(phase string, unseen bool, states ...CRRContainerState) CRR {
		return CRR{Name: CRRName(pod, 1), Attempt: 1, Containers: []string{"log"}, Phase: phase, States: states,
			Deadline: time.Minute, Created: exitAt, Unseen: unseen}
	}
	stopping := CRRContainerState{Name: "log", Phase: "Pending"}
	swap := []Action{swapOf(1, "log", img("log"))}
	failedSwap := want{verdict: VerdictAct, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}, actions: swap}
	for name, tc := range map[string]struct {
		crr    CRR
		crrAPI bool
		at     time.Time
		want   want
	}{
		"in the cache, past its deadline and the wait for its completion: failed kill, swap": {
			crr: crr("Recreating", false, stopping), crrAPI: true, at: deadline.Add(10 * time.Second), want: failedSwap},
		"unseen, before its deadline: in flight": {
			crr: crr("Recreating", true, stopping), crrAPI: true, at: deadline.Add(-time.Second),
			want: want{verdict: VerdictInProgress, requeue: 2 * time.Second}},
		"unseen, past its deadline: wait out a grace period past it": {
			crr: crr("Recreating", true, stopping), crrAPI: true, at: deadline.Add(10 * time.Second),
			want: want{verdict: VerdictInProgress, requeue: 30 * time.Second}},
		"unseen, never taken up as last seen: wait all the same": {
			crr: crr("", true), crrAPI: true, at: deadline.Add(10 * time.Second),
			want: want{verdict: VerdictInProgress, requeue: 30 * time.Second}},
		"unseen and the CRD removed: wait all the same": {
			crr: crr("Recreating", true, stopping), crrAPI: false, at: deadline.Add(10 * time.Second),
			want: want{verdict: VerdictInProgress, requeue: 30 * time.Second}},
		"unseen, its deadline and grace period over and still running: failed kill, swap": {
			crr: crr("Recreating", true, stopping), crrAPI: false, at: deadline.Add(40 * time.Second), want: failedSwap},
	} {
		t.Run(name, func(t *testing.T) {
			checkPlan(t, tc.want, Decide(Input{Pod: pod, Node: normal, CRRAPI: tc.crrAPI, CRRs: []CRR{tc.crr}, Now: tc.at, Policy: DefaultPolicy()}))
		})
	}
}

// explain says a CRR it describes from memory is as last seen.
func TestExplainSaysAnUnseenCRRIsAsLastSeen(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build()
	crr := CRR{Name: CRRName(pod, 1), Attempt: 1, Containers: []string{"log"}, Phase: "Recreating", Deadline: time.Minute, Created: exitAt}
	for _, unseen := range []bool{false, true} {
		crr.Unseen = unseen
		states := CRRStates(Input{Pod: pod, Node: normal, CRRAPI: true, CRRs: []CRR{crr}, Now: exitAt.Add(time.Second), Policy: DefaultPolicy()})
		if len(states) != 1 || strings.HasPrefix(states[0].Meaning, "as last seen") != unseen {
			t.Errorf("unseen %v: %+v", unseen, states)
		}
	}
}
