package decision_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The bound a stage holds the next one up: the pod's default grace period
// (30 s) plus the margin (10 s).
const stageBound = 40 * time.Second

// crrWindow is a stage CRR's stop window at the default deadline and grace
// period: deadline 1m, grace 30s, margin 10s. A stage stopped by CRR holds
// the next one up at least that long from the CRR's creation.
const crrWindow = time.Minute + 30*time.Second + 10*time.Second

func ordered(order string) *podtest.Builder {
	return podtest.Pod("p").Annotate(AnnotationStopOrder, order).Container("main", exited(0))
}

func stageCRR(stage, attempt int, containers ...string) Action {
	return Action{Kind: ActionCreateCRR, Containers: containers, Attempt: attempt, Stage: stage,
		CRRName: StageCRRName(podtest.Pod("p").Build(), stage, attempt), ReadPodFirst: true}
}

func deleteCRR(name string, stage int, containers ...string) Action {
	return Action{Kind: ActionDeleteCRR, CRRName: name, Stage: stage, Containers: containers}
}

func stageSwap(stage int, mark time.Time, swaps ...Swap) Action {
	a := Action{Kind: ActionSwapImage, Swaps: swaps, Stage: stage, StageMark: stageMarkOf(stage, mark)}
	for _, s := range swaps {
		a.Containers = append(a.Containers, s.Container)
	}
	return a
}

func stageMarkOf(stage int, at time.Time) string {
	return strings.Join([]string{string(rune('0' + stage)), at.UTC().Format(time.RFC3339)}, " ")
}

func crrOfStage(stage, attempt int, phase string, created time.Time, containers ...string) CRR {
	return CRR{Name: StageCRRName(podtest.Pod("p").Build(), stage, attempt), Stage: stage, Attempt: attempt,
		Phase: phase, Created: created, Containers: containers}
}

// deleteRefused is a deletion of the stage's first CRR refused for good
// (403: an RBAC or a policy without it), twice: its retry waits the long
// backoff.
func deleteRefused(stage int, at time.Time) Refusal {
	return Refusal{Kind: ActionDeleteCRR, CRRName: StageCRRName(podtest.Pod("p").Build(), stage, 1), Code: 403, Reason: "Forbidden",
		Permanent: true, Message: "forbidden", Count: 2, Permanents: 2, At: at}
}

// stageWant is what matters of a plan with an order: want, plus the stage.
type stageWant struct {
	want
	stage    int
	stopping []string
	next     []string
	until    time.Time
}

func TestStopOrder(t *testing.T) {
	shipper, proxy := podtest.Image(img("fluent-bit")), podtest.Image(img("istio-proxy"))
	cases := map[string]struct {
		pod      *corev1.Pod
		node     Node
		crrs     []CRR
		refusals []Refusal
		at       time.Time
		want     stageWant
		// noStage: the order is not followed (none, or unusable).
		noStage bool
	}{
		// The rules.
		"no order: every sidecar in one CRR, named as always": {
			pod:     podtest.Pod("p").Container("main", exited(0)).Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			noStage: true,
			want:    stageWant{want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "fluent-bit", "istio-proxy")}}},
		},
		"empty order is no order": {
			pod:     ordered(" , ").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			noStage: true,
			want:    stageWant{want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "fluent-bit", "istio-proxy")}}},
		},
		"sidecars the order does not name are stage 0, stopped first": {
			pod: ordered("fluent-bit,istio-proxy").Container("statsd", markCRR).Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageCRR(0, 1, "statsd")}},
				stage: 0, stopping: []string{"statsd"}, next: []string{"fluent-bit", "istio-proxy"}},
		},
		"first named stage: a CRR of its own name for the first sidecar only": {
			pod: ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageCRR(1, 1, "fluent-bit")}},
				stage: 1, stopping: []string{"fluent-bit"}, next: []string{"istio-proxy"}},
		},
		"stage 1 being stopped, within its bound: the next waits": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: exitAt.Add(time.Minute + time.Second).Sub(now)},
				stage: 1, stopping: []string{"fluent-bit"}, next: []string{"istio-proxy"}, until: exitAt.Add(crrWindow)},
		},
		"stage 1 terminated, its CRR still Recreating: delete it, then stage 2's CRR": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{
				deleteCRR(StageCRRName(podtest.Pod("p").Build(), 1, 1), 1, "fluent-bit"), stageCRR(2, 1, "istio-proxy")}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"stage 1 terminated, its CRR finished: only stage 2's CRR": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Completed", exitAt, "fluent-bit")},
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageCRR(2, 1, "istio-proxy")}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"stage 1 past its bound and its CRR's window: a Warning names it, and stage 2 goes on with it": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			at:   exitAt.Add(crrWindow),
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonStopOrderHeldUp}, actions: []Action{
				deleteCRR(StageCRRName(podtest.Pod("p").Build(), 1, 1), 1, "fluent-bit"), stageCRR(2, 1, "fluent-bit", "istio-proxy")}},
				stage: 2, stopping: []string{"fluent-bit", "istio-proxy"}},
		},
		"an earlier stage never comes back: its late sidecar, its CRR deleted, is stopped with the current stage": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{crrOfStage(2, 1, "Recreating", now.Add(-time.Second), "fluent-bit", "istio-proxy")},
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: time.Minute},
				stage: 2, stopping: []string{"fluent-bit", "istio-proxy"}},
		},
		"the last stage's CRR in flight, only an earlier stage's late sidecar still runs: the order never goes back": {
			// The bound of stage 1 passed and stage 2's CRR names both; the
			// proxy stopped, the shipper still drains. Stage 1's own CRR
			// (deleted when stage 2 began) is not made again beside it.
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR, exited(0)).Build(),
			crrs: []CRR{crrOfStage(2, 1, "Recreating", now.Add(-time.Second), "fluent-bit", "istio-proxy")},
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: time.Minute},
				stage: 2, stopping: []string{"fluent-bit"}},
		},
		"stage 1's CRR in flight, its deletion refused for good: stage 2's CRR waits for stage 1's deadline": {
			pod:      ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			crrs:     []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			refusals: []Refusal{deleteRefused(1, now)},
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: exitAt.Add(time.Minute + time.Second).Sub(now)},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"stage 1's deletion refused, its deadline passed: stage 2's CRR goes": {
			pod:      ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			crrs:     []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			refusals: []Refusal{deleteRefused(1, now)},
			at:       exitAt.Add(time.Minute),
			want:     stageWant{want: want{verdict: VerdictAct, actions: []Action{stageCRR(2, 1, "istio-proxy")}}, stage: 2, stopping: []string{"istio-proxy"}},
		},
		"stage 1's deletion refused once, its backoff passed: deleted again, then stage 2's CRR": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			refusals: []Refusal{{Kind: ActionDeleteCRR, CRRName: StageCRRName(podtest.Pod("p").Build(), 1, 1), Containers: []string{"fluent-bit"},
				MaybeApplied: true, Count: 1, At: now.Add(-DefaultPolicy().RetryBackoff)}},
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{
				deleteCRR(StageCRRName(podtest.Pod("p").Build(), 1, 1), 1, "fluent-bit"), stageCRR(2, 1, "istio-proxy")}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"a refused deletion of another CRR holds no other deletion up": {
			pod:      ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			crrs:     []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			refusals: []Refusal{deleteRefused(0, now)},
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{
				deleteCRR(StageCRRName(podtest.Pod("p").Build(), 1, 1), 1, "fluent-bit"), stageCRR(2, 1, "istio-proxy")}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"a stage whose kill was never issued is not skipped, however late": {
			pod: ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			at:  exitAt.Add(10 * stageBound),
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageCRR(1, 1, "fluent-bit")}},
				stage: 1, stopping: []string{"fluent-bit"}, next: []string{"istio-proxy"}},
		},
		"stage 2 counts its own attempts: its failed CRR is retried as attempt 2, stage 1's not counted": {
			pod: ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{
				crrOfStage(1, 1, "Completed", exitAt, "fluent-bit"),
				{Name: StageCRRName(podtest.Pod("p").Build(), 2, 1), Stage: 2, Attempt: 1, Phase: "Completed", Created: exitAt, Completed: exitAt, Containers: []string{"istio-proxy"}},
			},
			at: exitAt.Add(2 * time.Minute),
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonSidecarKillFailed}, failed: []string{"istio-proxy"},
				actions: []Action{stageCRR(2, 2, "istio-proxy"), recorded(2, 2, time.Time{})}}, stage: 2, stopping: []string{"istio-proxy"}},
		},
		"the recorded attempts of stage 1 do not count for stage 2, nor stage 2's for stage 0": {
			pod: ordered("fluent-bit,istio-proxy").Annotate(AnnotationCRRAttempts, "1:3").
				Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageCRR(2, 1, "istio-proxy")}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"stage 2's recorded attempts count for stage 2 after kruise deleted its CRRs": {
			pod: ordered("fluent-bit,istio-proxy").Annotate(AnnotationCRRAttempts, AttemptsMark(2, 3)).
				Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR).Build(),
			want: stageWant{want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarKillFailed, ReasonSidecarKillGaveUp, ReasonNoTerminationPath},
				failed: []string{"istio-proxy"}}, stage: 2, stopping: []string{"istio-proxy"}},
		},
		"three stages: the middle one runs while the first is done": {
			pod: ordered("a,b,c").Container("a", markCRR, exited(0)).Container("b", markCRR).Container("c", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Completed", exitAt, "a"),
				crrOfStage(2, 1, "Recreating", now.Add(-time.Second), "b")},
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: time.Minute},
				stage: 2, stopping: []string{"b"}, next: []string{"c"}, until: now.Add(crrWindow - time.Second)},
		},
		"the bound counts from the later of the stage's turn and its kill, and lasts its CRR's window": {
			pod: ordered("a,b,c").Container("a", markCRR, exited(0)).Container("b", markCRR).Container("c", markCRR).Build(),
			// b's CRR predates a's exit (a was stopped when b's turn had not come: never in this
			// controller, but the bound must not start before the turn).
			crrs: []CRR{crrOfStage(2, 1, "Recreating", t0, "b")},
			at:   exitAt.Add(stageBound - time.Second),
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: t0.Add(time.Minute + time.Second).Sub(exitAt.Add(stageBound - time.Second))},
				stage: 2, stopping: []string{"b"}, next: []string{"c"}, until: t0.Add(crrWindow)},
		},

		// Virtual node and image-only sidecars: one swap per stage, marked.
		"virtual node: stage 1 is a swap that records when the stage began": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markImage, shipper).Container("istio-proxy", markImage, proxy).Build(),
			node: virtual,
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageSwap(1, now, Swap{Index: 1, Container: "fluent-bit", From: img("fluent-bit"), To: quickExit})}},
				stage: 1, stopping: []string{"fluent-bit"}, next: []string{"istio-proxy"}},
		},
		"virtual node: stage 1 swapped and still running, within the bound: wait": {
			pod: ordered("fluent-bit,istio-proxy").Annotate(AnnotationStopStage, stageMarkOf(1, exitAt)).
				Container("fluent-bit", markImage, podtest.Image(quickExit)).Container("istio-proxy", markImage, proxy).Build(),
			node: virtual,
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: exitAt.Add(stageBound).Sub(now)},
				stage: 1, stopping: []string{"fluent-bit"}, next: []string{"istio-proxy"}, until: exitAt.Add(stageBound)},
		},
		"virtual node: stage 1 swapped and terminated: stage 2's swap": {
			pod: ordered("fluent-bit,istio-proxy").Annotate(AnnotationStopStage, stageMarkOf(1, exitAt)).
				Container("fluent-bit", markImage, podtest.Image(quickExit), exited(0)).Container("istio-proxy", markImage, proxy).Build(),
			node: virtual,
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageSwap(2, now, Swap{Index: 2, Container: "istio-proxy", From: img("istio-proxy"), To: quickExit})}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"virtual node: stage 1 swapped but past the bound: Warning, stage 2 swapped": {
			pod: ordered("fluent-bit,istio-proxy").Annotate(AnnotationStopStage, stageMarkOf(1, exitAt)).
				Container("fluent-bit", markImage, podtest.Image(quickExit)).Container("istio-proxy", markImage, proxy).Build(),
			node: virtual,
			at:   exitAt.Add(stageBound + time.Second),
			// The swapped stage-1 sidecar is followed through: looked at again
			// once grace and start allowance have passed since its stage began
			// (the earliest it can have been swapped; this sync first sees it).
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonStopOrderHeldUp},
				actions: []Action{stageSwap(2, exitAt.Add(stageBound+time.Second), Swap{Index: 2, Container: "istio-proxy", From: img("istio-proxy"), To: quickExit})},
				requeue: 30*time.Second + DefaultPolicy().SwapStartAllowance - stageBound - time.Second},
				stage: 2, stopping: []string{"fluent-bit", "istio-proxy"}},
		},
		"an order over a CRR sidecar and a swap sidecar: stage 2 swaps after stage 1's CRR": {
			pod: ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).
				Container("istio-proxy", podtest.Env(EnvTerminateWithImage, quickExit), proxy).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			want: stageWant{want: want{verdict: VerdictAct, actions: []Action{stageSwap(2, now, Swap{Index: 2, Container: "istio-proxy", From: img("istio-proxy"), To: quickExit})}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"every sidecar terminated: done": {
			pod:     ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, exited(0)).Container("istio-proxy", markCRR, exited(0)).Build(),
			noStage: true,
			want:    stageWant{want: want{verdict: VerdictDone}},
		},
		"mains still running: the order changes nothing": {
			pod:     podtest.Pod("p").Annotate(AnnotationStopOrder, "fluent-bit").Container("main").Container("fluent-bit", markCRR).Build(),
			noStage: true,
			want:    stageWant{want: want{verdict: VerdictMainsActive}},
		},

		// Bad input: a Warning, and every sidecar at once.
		"order names a main container": {
			pod:     ordered("main,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			noStage: true,
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonInvalidStopOrder},
				actions: []Action{crrFor("p", 1, "fluent-bit", "istio-proxy")}}},
		},
		"order names an unknown container": {
			pod:     ordered("fluentbit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			noStage: true,
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonInvalidStopOrder},
				actions: []Action{crrFor("p", 1, "fluent-bit", "istio-proxy")}}},
		},
		"order names a container twice": {
			pod:     ordered("fluent-bit,istio-proxy,fluent-bit").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			noStage: true,
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonInvalidStopOrder},
				actions: []Action{crrFor("p", 1, "fluent-bit", "istio-proxy")}}},
		},
		"order names a regular container that is not a sidecar": {
			pod:     ordered("fluent-bit,helper").Container("helper", exited(0)).Container("fluent-bit", markCRR).Build(),
			noStage: true,
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonInvalidStopOrder},
				actions: []Action{crrFor("p", 1, "fluent-bit")}}},
		},
		"order names a native sidecar": {
			pod: podtest.Pod("p").Annotate(AnnotationStopOrder, "mesh,fluent-bit").NativeSidecar("mesh").
				Container("main", exited(0)).Container("fluent-bit", markCRR).Build(),
			noStage: true,
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonInvalidStopOrder},
				actions: []Action{crrFor("p", 1, "fluent-bit")}}},
		},
		"order names an ignore-exit-code sidecar": {
			pod:     ordered("istio-proxy,fluent-bit").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR, ignoreRC).Build(),
			noStage: true,
			want: stageWant{want: want{verdict: VerdictAct, problems: []string{ReasonInvalidStopOrder},
				actions: []Action{crrFor("p", 1, "fluent-bit")}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Node: tc.node, CRRs: tc.crrs, Refusals: tc.refusals, CRRAPI: true, Now: tc.at, Policy: DefaultPolicy()}
			if in.Node == (Node{}) {
				in.Node = normal
			}
			if in.Now.IsZero() {
				in.Now = now
			}
			plan := Decide(in)
			got := stageWant{want: want{verdict: plan.Verdict, actions: plan.Actions, failed: plan.FailedKills, requeue: plan.RequeueAfter}}
			for _, p := range plan.Problems {
				got.problems = append(got.problems, p.Reason)
			}
			if plan.Stage != nil {
				got.stage, got.stopping, got.next, got.until = plan.Stage.Stage, plan.Stage.Stopping, plan.Stage.Next, plan.Stage.Until
			}
			if (plan.Stage == nil) != tc.noStage {
				t.Errorf("plan.Stage = %+v, want an order followed: %v", plan.Stage, !tc.noStage)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}, stageWant{})); diff != "" {
				t.Errorf("plan differs (-want +got):\n%s\nreason: %s\nproblems: %+v", diff, plan.Reason, plan.Problems)
			}
			assertOnlySidecarsTouched(t, plan)
		})
	}
}

func TestStageCRRNames(t *testing.T) {
	pod := podtest.Pod(strings.Repeat("a", 250)).UID("0f1e2d3c-aaaa-bbbb-cccc-000000000000").Build()
	if StageCRRName(pod, 0, 1) != CRRName(pod, 1) {
		t.Errorf("stage 0 must keep the name pods without an order get")
	}
	seen := map[string]bool{}
	for stage := 0; stage <= 12; stage++ {
		for attempt := 1; attempt <= 12; attempt++ {
			n := StageCRRName(pod, stage, attempt)
			if seen[n] {
				t.Fatalf("stage %d attempt %d repeats name %q", stage, attempt, n)
			}
			seen[n] = true
			if len(n) > 253 {
				t.Fatalf("name too long: %d", len(n))
			}
		}
	}
}

func TestExplainShowsTheStage(t *testing.T) {
	pod := ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build()
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(),
		CRRs: []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")}})
	var sb strings.Builder
	if err := plan.Explain(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"Order:    fluent-bit -> istio-proxy", "Stage:    1 of 2, stopping [fluent-bit]",
		"[istio-proxy] wait for [fluent-bit] until they terminate, or until " + exitAt.Add(crrWindow).Format(time.RFC3339)} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
}

// Stop order "fluent-bit": the sidecars it does not name (istio-proxy) are
// stage 0, fluent-bit stage 1. fluent-bit has stopped; istio-proxy still
// runs.
func orderedProxyRunning() *corev1.Pod {
	return ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Exited(137, exitAt.Add(20*time.Second))).
		Container("istio-proxy", markCRR, podtest.Running()).Build()
}

// Once stage 1 was issued (its CRR exists), a stage-0 sidecar that still
// runs is stopped with the current stage: the order never goes back to
// stage 0, whose CRR would then be made beside stage 1's.
func TestALateStageZeroSidecarDoesNotSendTheOrderBack(t *testing.T) {
	p := Decide(Input{Pod: orderedProxyRunning(), Node: normal, CRRAPI: true, Now: exitAt.Add(30 * time.Second), Policy: DefaultPolicy(),
		CRRs: []CRR{crrOfStage(1, 1, "Recreating", exitAt.Add(10*time.Second), "fluent-bit")}})
	if p.Stage == nil || p.Stage.Stage != 1 {
		t.Fatalf("stage %+v, want stage 1 to stay the current one", p.Stage)
	}
	for _, a := range p.Actions {
		if a.Kind == ActionCreateCRR && a.Stage == 0 {
			t.Errorf("a stage-0 CRR %+v beside stage 1's", a)
		}
	}
}

// The only sidecar still running is of the last stage that was issued: its
// kill follows it through; no later stage waits, so nothing is "held up".
func TestTheLastRunningStageIsNotHeldUp(t *testing.T) {
	p := Decide(Input{Pod: orderedProxyRunning(), Node: normal, CRRAPI: true, Now: exitAt.Add(5 * time.Minute), Policy: DefaultPolicy(),
		CRRs: []CRR{crrOfStage(0, 1, "Recreating", exitAt.Add(time.Second), "istio-proxy")}})
	if p.Stage == nil || p.Stage.Stage != 0 || len(p.Stage.HeldUp) != 0 || !p.Stage.Until.IsZero() {
		t.Fatalf("stage %+v, want stage 0, nothing held up, no bound", p.Stage)
	}
	for _, pr := range p.Problems {
		if pr.Reason == ReasonStopOrderHeldUp {
			t.Errorf("%s: %s", pr.Reason, pr.Message)
		}
	}
}

// The plan's reason names the stop order's wait only while later stages
// wait: not for the last stage.
func TestStopOrderReasonOnlyWhileLaterStagesWait(t *testing.T) {
	first := ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Running()).Container("istio-proxy", markCRR, podtest.Running()).Build()
	p := Decide(Input{Pod: first, Node: normal, CRRAPI: true, Now: exitAt.Add(time.Second), Policy: DefaultPolicy()})
	if !strings.Contains(p.Reason, "stop order: stage 0 of 1, [fluent-bit] wait for [istio-proxy]") {
		t.Errorf("first stage's reason %q, want the wait named", p.Reason)
	}
	last := Decide(Input{Pod: orderedProxyRunning(), Node: normal, CRRAPI: true, Now: exitAt.Add(5 * time.Minute), Policy: DefaultPolicy(),
		CRRs: []CRR{crrOfStage(0, 1, "Recreating", exitAt.Add(time.Second), "istio-proxy")}})
	if strings.Contains(last.Reason, "stop order:") {
		t.Errorf("last stage's reason %q names a wait", last.Reason)
	}
}

// A refused swap of the current stage's sidecar is waited out within a stop
// order as without one: the swap is not sent again before its backoff.
func TestARefusedSwapInAStopOrderWaitsItsBackoff(t *testing.T) {
	pod := ordered("fluent-bit").Container("fluent-bit", markImage, podtest.Running()).Container("istio-proxy", markImage, podtest.Running()).Build()
	now := exitAt.Add(10 * time.Second)
	p := Decide(Input{Pod: pod, Node: virtual, CRRAPI: true, Now: now, Policy: DefaultPolicy(),
		Refusals: []Refusal{{Kind: ActionSwapImage, Containers: []string{"istio-proxy"}, Code: 500, Count: 1, At: now.Add(-time.Second)}}})
	for _, a := range p.Actions {
		if a.Kind == ActionSwapImage {
			t.Errorf("swap %+v sent again within its backoff", a)
		}
	}
	if p.RequeueAfter <= 0 || p.RequeueAfter > DefaultPolicy().RetryBackoff {
		t.Errorf("requeue %s, want the rest of the backoff", p.RequeueAfter)
	}
}

// A stage's retry (its first CRR past the deadline, still Recreating) does
// not delete the stage's own first CRR: only earlier stages' CRRs are
// cleared before a stage's CRR.
func TestAStagesRetryDoesNotDeleteItsOwnCRR(t *testing.T) {
	pod := ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Running()).Container("istio-proxy", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).Build()
	crr := crrOfStage(1, 1, "Recreating", exitAt.Add(10*time.Second), "fluent-bit")
	crr.Deadline = time.Minute
	st0 := crrOfStage(0, 1, "Completed", exitAt.Add(time.Second), "istio-proxy")
	st0.Completed = exitAt.Add(6 * time.Second)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: exitAt.Add(10*time.Second + 3*time.Minute), Policy: DefaultPolicy(),
		CRRs: []CRR{st0, crr}})
	retry := false
	for _, a := range p.Actions {
		if a.Kind == ActionDeleteCRR {
			t.Errorf("delete %+v before the stage's retry", a)
		}
		retry = retry || (a.Kind == ActionCreateCRR && a.Stage == 1 && a.Attempt == 2)
	}
	if !retry {
		t.Fatalf("actions %+v, want stage 1's second attempt", p.Actions)
	}
}

// A refused CRR of an earlier stage is no refusal of this stage's: stage 0's
// CRR for istio-proxy was refused a second ago (istio-proxy has stopped
// since), and stage 1's first CRR is made now, not after that backoff.
func TestAnEarlierStagesRefusedCRRDoesNotHoldTheNextStage(t *testing.T) {
	pod := ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Running()).
		Container("istio-proxy", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).Build()
	now := exitAt.Add(10 * time.Second)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(),
		Refusals: []Refusal{{Kind: ActionCreateCRR, Containers: []string{"istio-proxy"}, Attempt: 1, Code: 500, Count: 1, At: now.Add(-time.Second)}}})
	if len(p.Actions) != 1 || p.Actions[0].Kind != ActionCreateCRR || p.Actions[0].Stage != 1 || p.Actions[0].Attempt != 1 {
		t.Errorf("actions %+v (%s), want stage 1's first CRR now", p.Actions, p.Reason)
	}
}

// A stop-stage mark that cannot be read (its time is not a time) reads as
// none: no stage counts as issued, and the order starts at stage 0.
func TestAnUnreadableStageMarkIsNone(t *testing.T) {
	pod := ordered("fluent-bit").Annotate(AnnotationStopStage, "1 not-a-time").
		Container("fluent-bit", markCRR, podtest.Running()).Container("istio-proxy", markCRR, podtest.Running()).Build()
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: exitAt.Add(time.Second), Policy: DefaultPolicy()})
	if p.Stage == nil || p.Stage.Stage != 0 || len(p.Actions) != 1 || strings.Join(p.Actions[0].Containers, ",") != "istio-proxy" {
		t.Errorf("stage %+v, actions %+v; want stage 0 stopping istio-proxy only", p.Stage, p.Actions)
	}
}

// Stage 2's first CRR waits behind stage 1's CRR, still in flight, whose
// deletion was refused: a first attempt has no failed attempt to record.
func TestAFirstStageCRRThatWaitsRecordsNoAttempt(t *testing.T) {
	pod := ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).
		Container("istio-proxy", markCRR, podtest.Running()).Build()
	st1 := crrOfStage(1, 1, "Recreating", exitAt.Add(time.Second), "fluent-bit")
	st1.Deadline = 10 * time.Minute
	now := exitAt.Add(20 * time.Second)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), CRRs: []CRR{st1},
		Refusals: []Refusal{deleteRefused(1, now.Add(-time.Second))}})
	if len(p.Actions) != 0 || p.Stage == nil || p.Stage.Stage != 2 || !strings.Contains(p.Reason, "waits") {
		t.Fatalf("stage %+v, actions %+v, reason %q; want stage 2's CRR waiting", p.Stage, p.Actions, p.Reason)
	}
	if recordIn(p) != "" {
		t.Errorf("records attempts %q for a first attempt", recordIn(p))
	}
}

// Stage 2's first CRR failed (istio-proxy still runs after it completed)
// and its retry waits behind an earlier stage's CRR in flight whose
// deletion was refused: the failed attempt is recorded now, as kill does for
// a retry that waits its backoff, so kruise deleting that CRR cannot reset
// the count.
func TestAStageRetryThatWaitsRecordsTheFailedAttempt(t *testing.T) {
	pod := ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).
		Container("istio-proxy", markCRR, podtest.Running()).Build()
	st1 := crrOfStage(1, 1, "Recreating", exitAt.Add(time.Second), "fluent-bit")
	st1.Deadline = 10 * time.Minute
	st2 := crrOfStage(2, 1, "Completed", exitAt.Add(6*time.Second), "istio-proxy")
	st2.Completed = exitAt.Add(8 * time.Second)
	now := exitAt.Add(time.Minute)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), CRRs: []CRR{st1, st2},
		Refusals: []Refusal{deleteRefused(1, now.Add(-time.Second))}})
	if len(stopsIn(p)) != 0 || recordIn(p) != AttemptsMark(2, 1) {
		t.Errorf("actions %+v, records %q (%s); want the retry waiting and attempt 1 of stage 2 recorded", p.Actions, recordIn(p), p.Reason)
	}
}

// Stage 1's sidecar was held up past its bound, so stage 2 was stopped
// beside it; it terminated 20 s after stage 2's CRR was made. Stage 2's
// bound counts from then, not from its CRR: stage 2 still holds stage 3 up
// 45 s after its CRR (bound 40 s), until 60 s after it.
func TestAStagesBoundCountsFromTheEarlierStagesLateFinish(t *testing.T) {
	issued := exitAt.Add(50 * time.Second)
	// a finishes late enough that the bound from its finish outlasts stage
	// 2's CRR's window (issued + 1m40s).
	pod := ordered("a,b,c").Container("a", markCRR, podtest.Exited(137, issued.Add(70*time.Second))).
		Container("b", markCRR, podtest.Running()).Container("c", markCRR, podtest.Running()).Build()
	st1 := crrOfStage(1, 1, "Completed", exitAt.Add(time.Second), "a")
	st1.Completed = exitAt.Add(61 * time.Second)
	st2 := crrOfStage(2, 1, "Recreating", issued, "b")
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: issued.Add(105 * time.Second), Policy: DefaultPolicy(), CRRs: []CRR{st1, st2}})
	if p.Stage == nil || p.Stage.Stage != 2 || len(p.Stage.HeldUp) != 0 || !p.Stage.Until.Equal(issued.Add(110*time.Second)) {
		t.Errorf("stage %+v, want stage 2 holding stage 3 up until %s", p.Stage, issued.Add(110*time.Second))
	}
}
