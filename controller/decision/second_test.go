package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// settledByKruise is a pod whose phase OpenKruise's SidecarTerminator
// settled: its SidecarTerminated condition carries kruise's message
// (markJobPodTerminated, sidecar_terminator_controller.go).
func settledByKruise(phase corev1.PodPhase, proxy ...podtest.Option) *corev1.Pod {
	pod := podtest.Pod("p").Phase(phase).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
		Container("main", exited(0)).Container("proxy", append([]podtest.Option{markCRR, ignoreRC}, proxy...)...).Build()
	pod.Status.Conditions[0].Message = KruiseSettleMessage
	return pod
}

// When OpenKruise's own SidecarTerminator acts on the pod too, the plan
// yields to it, by the documented rule: no CRR for the containers kruise's
// CRR names while it has the time a CRR of ours would have had, a
// follow-through after that, and no settle or kill of a pod whose phase
// kruise settled. Each says so with a SecondTerminator Warning.
func TestDecideYieldsToASecondTerminator(t *testing.T) {
	running := podtest.Pod("p").Container("main", exited(0)).Container("proxy", markCRR).Build()
	two := podtest.Pod("p").Container("main", exited(0)).Container("proxy", markCRR).Container("shipper", markCRR).Build()
	byAnnotation := podtest.Pod("p").Annotate(AnnotationSidecars, "proxy").Container("main", exited(0)).Container("proxy").Build()
	kruiseCRR := &SecondTerminator{CRR: "sidecar-termination-u", Containers: []string{"proxy"}, Phase: "Recreating", Created: exitAt}
	deadline := CRRDeadline(running, DefaultPolicy()) // 60s: the CRR's own, longer than the pod's grace plus margin
	cases := map[string]struct {
		pod    *corev1.Pod
		second *SecondTerminator
		seen   bool
		at     time.Time
		want   want
	}{
		"no second terminator: our CRR": {
			pod: running, want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}},
		},
		"kruise's CRR names the sidecar: no second CRR, wait for it": {
			pod: running, second: kruiseCRR,
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSecondTerminator}, requeue: deadline},
		},
		"kruise's CRR had its time and the sidecar still runs: follow through": {
			pod: running, second: kruiseCRR, at: exitAt.Add(deadline),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}, problems: []string{ReasonSecondTerminator}},
		},
		"kruise's CRR names one sidecar: ours stops only the other": {
			pod: two, second: kruiseCRR,
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "shipper")}, problems: []string{ReasonSecondTerminator}, requeue: deadline},
		},
		"kruise seen in the cluster: the first CRR waits for its CRR to show": {
			pod: running, seen: true,
			want: want{verdict: VerdictInProgress, requeue: exitAt.Add(SecondTerminatorGrace).Sub(now)},
		},
		"kruise seen, its CRR did not show within the grace: our CRR": {
			pod: running, seen: true, at: exitAt.Add(SecondTerminatorGrace),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}},
		},
		"kruise seen, a sidecar marked by our annotation only: kruise never acts on it, no wait": {
			pod: byAnnotation, seen: true,
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}},
		},
		"kruise settled the phase: its ignore-exit-code sidecar is left to it and the kubelet": {
			pod: settledByKruise(corev1.PodSucceeded), at: exitAt.Add(10 * time.Minute),
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSecondTerminator}},
		},
		"kruise settled, the kubelet reverted the phase: not settled again": {
			pod:  settledByKruise(corev1.PodRunning),
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSecondTerminator}},
		},
		"kruise settled and the sidecar stopped: done": {
			pod:  settledByKruise(corev1.PodSucceeded, exited(137)),
			want: want{verdict: VerdictDone},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Node: normal, CRRAPI: true, Now: tc.at, Policy: DefaultPolicy(),
				SecondTerminator: tc.second, KruiseTerminatorSeen: tc.seen}
			if in.Now.IsZero() {
				in.Now = now
			}
			plan := Decide(in)
			checkPlan(t, tc.want, plan)
			for _, p := range plan.Problems {
				if !strings.Contains(p.Message, "OpenKruise's own SidecarTerminator") || !strings.Contains(p.Message, "feature gate") {
					t.Errorf("the Warning does not name the second terminator and the fix: %q", p.Message)
				}
			}
			assertOnlySidecarsTouched(t, plan)
		})
	}
}

// The free signal: kruise-daemon keeps one of our CRRs Pending only while it
// works on another CRR of the pod; if none of ours is that one, someone
// else's is.
func TestSuspectSecondTerminator(t *testing.T) {
	for _, tc := range []struct {
		phases []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"Recreating"}, false},
		{[]string{"Pending"}, true},
		{[]string{"Completed", "Pending"}, true},
		// Our stage-1 CRR is the one worked on: our own stage-2 CRR waits.
		{[]string{"Recreating", "Pending"}, false},
	} {
		var crrs []CRR
		for i, ph := range tc.phases {
			crrs = append(crrs, CRR{Name: "c", Attempt: i + 1, Phase: ph})
		}
		if got := SuspectSecondTerminator(Input{CRRs: crrs}); got != tc.want {
			t.Errorf("phases %v: suspect %t, want %t", tc.phases, got, tc.want)
		}
	}
}

func TestKruiseTerminatorCRRNameIsKruises(t *testing.T) {
	pod := podtest.Pod("p").UID("0f1e2d3c-aaaa-bbbb-cccc-000000000000").Build()
	// getCRRName in kill_container_action.go: fmt.Sprintf("sidecar-termination-%v", pod.UID).
	if got := KruiseTerminatorCRRName(pod); got != "sidecar-termination-0f1e2d3c-aaaa-bbbb-cccc-000000000000" {
		t.Errorf("got %q", got)
	}
}

// The wait for kruise's CRR asks the reconciler to look for it; nothing
// else does.
func TestAwaitsSecondTerminatorOnlyDuringTheWait(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("proxy", markCRR).Build()
	for _, tc := range []struct {
		seen bool
		at   time.Time
		want bool
	}{{true, now, true}, {true, exitAt.Add(SecondTerminatorGrace), false}, {false, now, false}} {
		plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: tc.at, Policy: DefaultPolicy(), KruiseTerminatorSeen: tc.seen})
		if plan.AwaitsSecondTerminator != tc.want {
			t.Errorf("seen %t at %s: awaits %t, want %t", tc.seen, tc.at.Sub(exitAt), plan.AwaitsSecondTerminator, tc.want)
		}
	}
}

// The second terminator's Warning is added to a plan that did not need it,
// once: not again to a plan that has it, and not without a terminator or a
// pod. explain says "(none yet)" for its CRR's phase before kruise sets one.
func TestWithSecondTerminatorWarnsOnce(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, exited(0)).Build()
	st := &SecondTerminator{CRR: "kruise-crr", Containers: []string{"log"}}
	count := func(p Plan) int {
		n := 0
		for _, pr := range p.Problems {
			if pr.Reason == ReasonSecondTerminator {
				n++
			}
		}
		return n
	}
	base := Plan{Verdict: VerdictDone, Problems: []Problem{{Reason: ReasonUnknownSidecarName, Message: "other"}}}
	once := WithSecondTerminator(base, Input{Pod: pod, SecondTerminator: st})
	if count(once) != 1 || len(once.Problems) != 2 {
		t.Errorf("problems %+v, want the other one and one %s", once.Problems, ReasonSecondTerminator)
	}
	if twice := WithSecondTerminator(once, Input{Pod: pod, SecondTerminator: st}); count(twice) != 1 {
		t.Errorf("applied twice: %d Warnings", count(twice))
	}
	if count(WithSecondTerminator(base, Input{Pod: pod})) != 0 || count(WithSecondTerminator(base, Input{SecondTerminator: st})) != 0 {
		t.Errorf("a Warning without a terminator or without a pod")
	}
	once.SecondTerminator = st
	if out := explain(t, once); !strings.Contains(out, "(phase (none yet))") {
		t.Errorf("explain without a phase:\n%s", out)
	}
}
