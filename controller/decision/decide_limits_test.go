package decision_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// Decide at its limits: the instant a wait ends and the second before it,
// the last CRR attempt, a Pending pod whose native sidecar runs. Each row is
// one a one-character change of the decision would move (a < for a <=).
func TestDecideAtItsLimits(t *testing.T) {
	failedCRR := func(attempt int) CRR {
		return CRR{Name: CRRName(podtest.Pod("p").Build(), attempt), Attempt: attempt, Containers: []string{"log"},
			Phase: "Completed", Created: t0, Completed: t0}
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		crrs []CRR
		at   time.Time
		want want
	}{
		// A native sidecar runs for the pod's life, so it never completes:
		// counting it as an unfinished init container would leave a Pending
		// pod (its sidecar never started) ignored forever.
		"Pending, a running native sidecar and a never-started sidecar: swap it": {
			pod: podtest.Pod("p").Phase(corev1.PodPending).NativeSidecar("mesh").Init("setup").
				Container("main", exited(0)).Container("log", markCRR, markImage, podtest.NeverStarted()).Build(),
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		// The kubelet had until exactly now (30 s grace + 10 s): at that
		// instant the wait is over, and a plan that waits zero would never be
		// looked at again.
		"ignore-exit-code, settled, grace just over: stop it ourselves": {
			pod: podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
				Container("main", exited(0)).Container("proxy", markCRR, ignoreRC).Build(),
			at:   exitAt.Add(40 * time.Second),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}},
		},
		"ignore-exit-code, settled, a second before the grace ends: wait that second": {
			pod: podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
				Container("main", exited(0)).Container("proxy", markCRR, ignoreRC).Build(),
			at:   exitAt.Add(39 * time.Second),
			want: want{verdict: VerdictInProgress, requeue: time.Second},
		},
		// MaxCRRAttempts is 3: two failed CRRs leave one more.
		"two CRRs failed: the third and last attempt": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			crrs: []CRR{failedCRR(1), failedCRR(2)},
			at:   t0.Add(time.Hour),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 3, "log"), recorded(0, 3, time.Time{})}, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Node: normal, CRRs: tc.crrs, CRRAPI: true, Now: tc.at, Policy: DefaultPolicy()}
			if in.Now.IsZero() {
				in.Now = now
			}
			plan := Decide(in)
			checkPlan(t, tc.want, plan)
			sameAfterTrim(t, in, plan)
		})
	}
}
