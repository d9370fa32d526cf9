package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

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
		"in the cache, past its stop window, its completion never shown: failed kill, swap": {
			crr: crr("Recreating", false, stopping), crrAPI: true, at: deadline.Add(40 * time.Second), want: failedSwap},
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

// A controller that finds the CRR API gone remembers no CRR made before
// (it started, or took the lead, after the CRD was removed): on a node a
// kruise-daemon serves, a stop begun under one of them may run a grace
// period (30 s here) past the moment the API went away, so a swap of a
// running sidecar waits that long and a margin (10 s). Where no daemon
// shows, or the sidecar is not running, or the API is served, nothing is
// waited for. Soak seeds 405 and 460 swapped inside such a stop.
func TestASwapAfterTheCRDWentAwaitsStopsBegunBefore(t *testing.T) {
	gone := exitAt.Add(20 * time.Second)
	running := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	waitingLog := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage, podtest.Waiting("ContainerCreating", nil)).Build()
	served := Node{Name: "node-1", Found: true, Daemon: DaemonServes, DaemonWhy: "kruise-daemon wrote the node's NodeImage status"}
	absent := Node{Name: "node-1", Found: true, Daemon: DaemonAbsent, DaemonWhy: "never wrote"}
	swap := want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}}
	recordGone := Action{Kind: ActionRecordAPIGone, Began: gone}
	// A pod on which a replica recorded that it found the API gone at gone.
	recorded := running.DeepCopy()
	recorded.Annotations = map[string]string{AnnotationCRRAPIGone: CRRAPIGoneRecord(gone)}
	swapRecorded := want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}}
	for name, tc := range map[string]struct {
		pod    *corev1.Pod
		node   Node
		crrAPI bool
		gone   time.Time
		served time.Time
		at     time.Time
		want   want
	}{
		"daemon serves the node, just after the API went: wait, and record the loss on the pod": {
			pod: running, node: served, gone: gone, at: gone.Add(time.Second),
			want: want{verdict: VerdictInProgress, requeue: 39 * time.Second, actions: []Action{recordGone}}},
		"daemon serves the node, a second before the wait ends: wait": {
			pod: running, node: served, gone: gone, at: gone.Add(39 * time.Second),
			want: want{verdict: VerdictInProgress, requeue: time.Second, actions: []Action{recordGone}}},
		"a new leader finds the API gone later: the pod's record counts, and stands": {
			pod: recorded, node: served, gone: gone.Add(30 * time.Second), at: gone.Add(39 * time.Second),
			want: want{verdict: VerdictInProgress, requeue: time.Second}},
		"the pod's record, a new leader's wait over: swap": {
			pod: recorded, node: served, gone: gone.Add(30 * time.Second), at: gone.Add(40 * time.Second), want: swapRecorded},
		"the pod's record is of a loss before the API was served again: this replica's own counts": {
			pod: recorded, node: served, gone: gone.Add(30 * time.Second), served: gone.Add(20 * time.Second), at: gone.Add(40 * time.Second),
			want: want{verdict: VerdictInProgress, requeue: 30 * time.Second, actions: []Action{{Kind: ActionRecordAPIGone, Began: gone.Add(30 * time.Second)}}}},
		"daemon serves the node, grace and margin over: swap": {
			pod: running, node: served, gone: gone, at: gone.Add(40 * time.Second), want: swap},
		"no daemon on the node: swap at once": {
			pod: running, node: absent, gone: gone, at: gone.Add(time.Second), want: swap},
		"nothing known of the node's daemon: swap at once": {
			pod: running, node: normal, gone: gone, at: gone.Add(time.Second), want: swap},
		"a sidecar not running has no stop to wait for": {
			pod: waitingLog, node: served, gone: gone, at: gone.Add(time.Second), want: swap},
		"the API served: a CRR, no wait": {
			pod: running, node: served, crrAPI: true, at: gone.Add(time.Second),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}}},
	} {
		t.Run(name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Node: tc.node, CRRAPI: tc.crrAPI, CRRAPIGoneSince: tc.gone, CRRAPIServedAt: tc.served, Now: tc.at, Policy: DefaultPolicy()}
			plan := Decide(in)
			checkPlan(t, tc.want, plan)
			if tc.want.verdict == VerdictInProgress && !strings.Contains(plan.Reason, "may still be stopping") {
				t.Errorf("the wait is not explained: %q", plan.Reason)
			}
		})
	}
}
