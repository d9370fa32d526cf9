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
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: exitAt.Add(stageBound).Sub(now)},
				stage: 1, stopping: []string{"fluent-bit"}, next: []string{"istio-proxy"}, until: exitAt.Add(stageBound)},
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
		"stage 1 past its bound: a Warning names it, and stage 2 goes on with it": {
			pod:  ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR).Container("istio-proxy", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Recreating", exitAt, "fluent-bit")},
			at:   exitAt.Add(stageBound),
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
				actions: []Action{stageCRR(2, 2, "istio-proxy")}}, stage: 2, stopping: []string{"istio-proxy"}},
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
			want: stageWant{want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarKillGaveUp, ReasonNoTerminationPath}},
				stage: 2, stopping: []string{"istio-proxy"}},
		},
		"three stages: the middle one runs while the first is done": {
			pod: ordered("a,b,c").Container("a", markCRR, exited(0)).Container("b", markCRR).Container("c", markCRR).Build(),
			crrs: []CRR{crrOfStage(1, 1, "Completed", exitAt, "a"),
				crrOfStage(2, 1, "Recreating", now.Add(-time.Second), "b")},
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: stageBound - time.Second},
				stage: 2, stopping: []string{"b"}, next: []string{"c"}, until: now.Add(stageBound - time.Second)},
		},
		"the bound counts from the later of the stage's turn and its kill": {
			pod: ordered("a,b,c").Container("a", markCRR, exited(0)).Container("b", markCRR).Container("c", markCRR).Build(),
			// b's CRR predates a's exit (a was stopped when b's turn had not come: never in this
			// controller, but the bound must not start before the turn).
			crrs: []CRR{crrOfStage(2, 1, "Recreating", t0, "b")},
			at:   exitAt.Add(stageBound - time.Second),
			want: stageWant{want: want{verdict: VerdictInProgress, requeue: time.Second},
				stage: 2, stopping: []string{"b"}, next: []string{"c"}, until: exitAt.Add(stageBound)},
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
		"[istio-proxy] wait for [fluent-bit] until they terminate, or until " + exitAt.Add(stageBound).Format(time.RFC3339)} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
}
