package decision_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

func onExit(action batchv1.PodFailurePolicyAction, container string, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
	req := &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}
	if container != "" {
		req.ContainerName = &container
	}
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: req}
}

func onDisruption(action batchv1.PodFailurePolicyAction) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}
}

const (
	in    = batchv1.PodFailurePolicyOnExitCodesOpIn
	notIn = batchv1.PodFailurePolicyOnExitCodesOpNotIn
	fail  = batchv1.PodFailurePolicyActionFailJob
	index = batchv1.PodFailurePolicyActionFailIndex
	skip  = batchv1.PodFailurePolicyActionIgnore
	count = batchv1.PodFailurePolicyActionCount
)

func TestStopChangesVerdictByRuleShape(t *testing.T) {
	type result struct {
		changed bool
		rule    int
		action  batchv1.PodFailurePolicyAction
		before  batchv1.PodFailurePolicyAction
	}
	for name, tc := range map[string]struct {
		rules      []batchv1.PodFailurePolicyRule
		mainExit   int32
		disruption bool
		kind       StopKind
		want       result
	}{
		// The first case: the whole Job would fail on a retriable failure.
		"FailJob NotIn [0 1] on every container, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", notIn, 0, 1)},
			mainExit: 1, kind: StopCRR, want: result{changed: true, rule: 0, action: fail}},
		"FailJob NotIn [0 1] on every container, main 1, swap": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", notIn, 0, 1)},
			mainExit: 1, kind: StopSwap},
		"FailJob NotIn [0 1] on the main, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "main", notIn, 0, 1)},
			mainExit: 1, kind: StopCRR},
		"FailJob NotIn [0 1] on the sidecar, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "proxy", notIn, 0, 1)},
			mainExit: 1, kind: StopCRR, want: result{changed: true, rule: 0, action: fail}},
		// The main's own exit already fails the Job: the sidecar changes nothing.
		"FailJob NotIn [0 1] on every container, main 2, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", notIn, 0, 1)},
			mainExit: 2, kind: StopCRR},
		// The second case: a real failure would be ignored forever.
		"Ignore In [137 143] on every container, main 3, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(skip, "", in, 137, 143)},
			mainExit: 3, kind: StopCRR, want: result{changed: true, rule: 0, action: skip}},
		"Ignore In [137 143] on the main, main 3, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(skip, "main", in, 137, 143)},
			mainExit: 3, kind: StopCRR},
		"Ignore In [137 143] on every container, main 3, swap": {rules: []batchv1.PodFailurePolicyRule{onExit(skip, "", in, 137, 143)},
			mainExit: 3, kind: StopSwap},
		"FailIndex NotIn [0] on every container, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(index, "", notIn, 0)},
			mainExit: 1, kind: StopCRR},
		"FailIndex In [42] on every container, Count NotIn [0], main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(index, "", in, 42), onExit(count, "", notIn, 0)},
			mainExit: 1, kind: StopCRR, want: result{changed: true, rule: 0, action: index, before: count}},
		// A SIGTERM handler may exit with any code, so a rule that names one
		// can read a CRR's stop.
		"FailJob In [42] on every container, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", in, 42)},
			mainExit: 1, kind: StopCRR, want: result{changed: true, rule: 0, action: fail}},
		// Count does what no rule does (the failure counts): reading the
		// sidecar's exit with it changes nothing.
		"Count In [143] on every container, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(count, "", in, 143)},
			mainExit: 1, kind: StopCRR},
		"Count In [143] on every container before Ignore NotIn [0], main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(count, "", in, 143), onExit(skip, "main", notIn, 0)},
			mainExit: 1, kind: StopCRR, want: result{changed: true, rule: 0, action: count, before: skip}},
		"Count NotIn [0] on every container, Count first on the main, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(count, "main", in, 1), onExit(fail, "", notIn, 0, 1)},
			mainExit: 1, kind: StopCRR},
		"In [0] only, main 1, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", in, 0)},
			mainExit: 1, kind: StopCRR},
		// Pod conditions are the same before and after a stop: a rule on
		// them that matches first hides every later one.
		"Ignore on DisruptionTarget first, pod disrupted, CRR": {rules: []batchv1.PodFailurePolicyRule{onDisruption(skip), onExit(fail, "", notIn, 0, 1)},
			mainExit: 1, disruption: true, kind: StopCRR},
		"Ignore on DisruptionTarget first, pod not disrupted, CRR": {rules: []batchv1.PodFailurePolicyRule{onDisruption(skip), onExit(fail, "", notIn, 0, 1)},
			mainExit: 1, kind: StopCRR, want: result{changed: true, rule: 1, action: fail}},
		// The mains succeeded: the pod fails only by the sidecar's exit,
		// and every rule that reads it changes the verdict.
		"FailJob NotIn [0 1] on every container, main 0, CRR": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", notIn, 0, 1)},
			mainExit: 0, kind: StopCRR, want: result{changed: true, rule: 0, action: fail}},
		"FailJob NotIn [0 1] on every container, main 0, swap": {rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", notIn, 0, 1)},
			mainExit: 0, kind: StopSwap},
	} {
		t.Run(name, func(t *testing.T) {
			b := podtest.Pod("p").OwnedByJob("j").Container("main", podtest.Exited(tc.mainExit, exitAt)).
				Container("proxy", markCRR, podtest.Running())
			if tc.disruption {
				b = b.Condition(corev1.DisruptionTarget, corev1.ConditionTrue)
			}
			job := &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: tc.rules}}
			c, changed := StopChangesVerdict(job, b.Build(), []string{"proxy"}, tc.kind)
			got := result{changed: changed}
			if changed {
				got.rule, got.action, got.before = c.Rule, c.Action, c.Before
				if c.Container != "proxy" || c.ExitCode == 0 {
					t.Errorf("change names container %q exit %d, want proxy and a non-zero exit", c.Container, c.ExitCode)
				}
			}
			if got != tc.want {
				t.Errorf("StopChangesVerdict = %+v, want %+v (%s)", got, tc.want, c)
			}
		})
	}
}

func TestStopChangesVerdictWithoutPolicy(t *testing.T) {
	pod := podtest.Pod("p").OwnedByJob("j").Container("main", podtest.Exited(1, exitAt)).Container("proxy", markCRR, podtest.Running()).Build()
	for name, job := range map[string]*JobFacts{"no Job": nil, "no policy": {Name: "ns/j"}, "no rules": {Name: "ns/j", Policy: &batchv1.PodFailurePolicy{}}} {
		if c, changed := StopChangesVerdict(job, pod, []string{"proxy"}, StopCRR); changed {
			t.Errorf("%s: StopChangesVerdict = %s, want no change", name, c)
		}
	}
}

func TestJobReadNeededOnlyForFailedMainsStoppedByCRR(t *testing.T) {
	owned := podtest.Pod("p").OwnedByJob("j").Build()
	bare := podtest.Pod("p").Build()
	for name, tc := range map[string]struct {
		pod         *corev1.Pod
		mainsFailed bool
		kind        StopKind
		want        bool
	}{
		"Job pod, main failed, CRR":     {pod: owned, mainsFailed: true, kind: StopCRR, want: true},
		"Job pod, main failed, swap":    {pod: owned, mainsFailed: true, kind: StopSwap},
		"Job pod, mains succeeded, CRR": {pod: owned, kind: StopCRR},
		"bare pod, main failed, CRR":    {pod: bare, mainsFailed: true, kind: StopCRR},
	} {
		if _, got := JobReadNeeded(tc.pod, tc.mainsFailed, tc.kind); got != tc.want {
			t.Errorf("%s: JobReadNeeded = %v, want %v", name, got, tc.want)
		}
	}
}

func TestDecideSettlesBeforeACRRTheJobsPolicyCouldRead(t *testing.T) {
	failJobAny := &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExit(fail, "", notIn, 0, 1)}}}
	failJobMain := &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExit(fail, "main", notIn, 0, 1)}}}
	failedMain := func() *podtest.Builder {
		return podtest.Pod("p").OwnedByJob("j").Container("main", exited(1))
	}
	settle := Action{Kind: ActionSettlePhase, Containers: []string{"proxy"}, Phase: corev1.PodFailed,
		JobRule: `Job ns/j's podFailurePolicy rule 0 (FailJob) would read sidecar "proxy"'s exit code 143 from the stop, where its main containers alone get no rule (the failure counts against backoffLimit)`}
	for name, tc := range map[string]struct {
		pod      *corev1.Pod
		job      *JobFacts
		needsJob string
		settles  bool
		kind     ActionKind
	}{
		"main failed, CRR, Job not read yet: the plan asks for it": {pod: failedMain().Container("proxy", markCRR, podtest.Running()).Build(),
			needsJob: "j", kind: ActionCreateCRR},
		"main failed, CRR, rule on every container: settle first": {pod: failedMain().Container("proxy", markCRR, podtest.Running()).Build(),
			job: failJobAny, settles: true, kind: ActionSettlePhase},
		"main failed, CRR, rule on the main: the CRR": {pod: failedMain().Container("proxy", markCRR, podtest.Running()).Build(),
			job: failJobMain, kind: ActionCreateCRR},
		"main failed, CRR, Job without policy: the CRR": {pod: failedMain().Container("proxy", markCRR, podtest.Running()).Build(),
			job: &JobFacts{Name: "ns/j"}, kind: ActionCreateCRR},
		"main failed, swap: no Job read": {pod: failedMain().Container("proxy", markImage, podtest.Running()).Build(),
			kind: ActionSwapImage},
		"mains succeeded, CRR: no Job read": {pod: podtest.Pod("p").OwnedByJob("j").Container("main", exited(0)).Container("proxy", markCRR, podtest.Running()).Build(),
			kind: ActionCreateCRR},
		"bare pod, main failed, CRR: no Job read": {pod: podtest.Pod("p").Container("main", exited(1)).Container("proxy", markCRR, podtest.Running()).Build(),
			kind: ActionCreateCRR},
	} {
		t.Run(name, func(t *testing.T) {
			plan := Decide(Input{Pod: tc.pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), Job: tc.job})
			if plan.NeedsJob != tc.needsJob {
				t.Errorf("NeedsJob = %q, want %q", plan.NeedsJob, tc.needsJob)
			}
			if len(plan.Actions) != 1 || plan.Actions[0].Kind != tc.kind {
				t.Fatalf("actions = %+v, want one %s (%s)", plan.Actions, tc.kind, plan.Reason)
			}
			if tc.settles {
				if diff := cmp.Diff(settle, plan.Actions[0]); diff != "" {
					t.Errorf("settle differs (-want +got):\n%s", diff)
				}
				if plan.JobVerdict == nil || plan.JobVerdict.Rule != 0 || plan.JobVerdict.Action != fail {
					t.Errorf("JobVerdict = %+v, want rule 0 FailJob", plan.JobVerdict)
				}
			}
		})
	}
}

func TestSettledForTheJobLeavesTheSidecarToTheKubeletThenStopsIt(t *testing.T) {
	settled := func(at time.Time) *corev1.Pod {
		return podtest.Pod("p").OwnedByJob("j").Phase(corev1.PodFailed).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, at).
			Container("main", exited(1)).Container("proxy", markCRR, podtest.Running()).Build()
	}
	plan := Decide(Input{Pod: settled(exitAt), Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if plan.Verdict != VerdictInProgress || len(plan.Actions) != 0 {
		t.Errorf("just settled: verdict %s, actions %+v, want InProgress and none (the kubelet stops it): %s", plan.Verdict, plan.Actions, plan.Reason)
	}
	plan = Decide(Input{Pod: settled(now.Add(-time.Hour)), Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != ActionCreateCRR {
		t.Errorf("settled an hour ago, sidecar still running: actions %+v, want a CRR: %s", plan.Actions, plan.Reason)
	}
}

func TestSidecarThatFailsASucceededPodIsAWarning(t *testing.T) {
	pod := podtest.Pod("p").OwnedByJob("j").Phase(corev1.PodFailed).Container("main", exited(0)).Container("proxy", markCRR, exited(143)).Build()
	crr := CRR{Name: CRRName(pod, 1), Attempt: 1, Containers: []string{"proxy"}, Phase: "Recreating", Created: exitAt}
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), CRRs: []CRR{crr}})
	if len(plan.Problems) != 1 || plan.Problems[0].Reason != ReasonSidecarFailedPod {
		t.Fatalf("problems = %+v, want one %s", plan.Problems, ReasonSidecarFailedPod)
	}
	for _, want := range []string{`"proxy"`, "143", "SIGTERM", EnvIgnoreExitCode} {
		if !strings.Contains(plan.Problems[0].Message, want) {
			t.Errorf("message %q does not name %s", plan.Problems[0].Message, want)
		}
	}
	for name, in := range map[string]Input{
		"a main failed": {Pod: podtest.Pod("p").Phase(corev1.PodFailed).Container("main", exited(1)).Container("proxy", markCRR, exited(143)).Build(), CRRs: []CRR{crr}},
		"not our stop":  {Pod: pod},
		"ignore-exit-code sidecar": {Pod: podtest.Pod("p").Phase(corev1.PodFailed).Container("main", exited(0)).
			Container("proxy", markCRR, ignoreRC, exited(143)).Build(), CRRs: []CRR{crr}},
	} {
		in.Node, in.CRRAPI, in.Now, in.Policy = normal, true, now, DefaultPolicy()
		if p := Decide(in); len(p.Problems) != 0 {
			t.Errorf("%s: problems %+v, want none", name, p.Problems)
		}
	}
}

func TestExplainNamesTheJobsRule(t *testing.T) {
	pod := podtest.Pod("p").OwnedByJob("j").Container("main", exited(1)).Container("proxy", markCRR, podtest.Running()).Build()
	job := &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExit(skip, "", in, 137, 143)}}}
	for name, tc := range map[string]struct {
		job  *JobFacts
		want []string
	}{
		"before the read": {want: []string{"Job:      j is read before the ContainerRecreateRequest"}},
		"after the read": {job: job, want: []string{`Job:      Job ns/j's podFailurePolicy rule 0 (Ignore) would read sidecar "proxy"'s exit code 143`,
			"the phase is settled from the main containers before the stop", "Action:   phase settled to Failed from the main containers before sidecars [proxy] are stopped"}},
	} {
		var b strings.Builder
		if err := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), Job: tc.job}).Explain(&b); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: explain lacks %q:\n%s", name, w, b.String())
			}
		}
	}
}

// Where a rule of the Job's podFailurePolicy could read the exit a CRR
// leaves, the sidecar is stopped by the quick-exit swap, whose 0 no rule
// reads; where no swap is possible, the phase is settled first and a
// Warning names the rule and the fixes.
func TestDecideStopsByTheSwapWhereTheJobsRuleCouldReadACRR(t *testing.T) {
	const (
		swap   = ActionSwapImage
		crr    = ActionCreateCRR
		settle = ActionSettlePhase
	)
	rules := func(rs ...batchv1.PodFailurePolicyRule) *JobFacts {
		return &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: rs}}
	}
	markBoth := []podtest.Option{markCRR, markImage}
	refusedSwap := Refusal{Kind: ActionSwapImage, Containers: []string{"proxy"}, Code: 403, Reason: "Forbidden", Permanent: true,
		Message: "denied by policy", Count: 1, Permanents: 1, At: exitAt}
	for name, tc := range map[string]struct {
		job      *JobFacts
		mainExit int32
		sidecar  []podtest.Option
		refused  []Refusal
		node     *Node
		want     ActionKind
		rule     int  // the rule named, when one reads the stop
		warns    bool // JobPolicyReadsSidecarExit
	}{
		"FailJob NotIn [0 1], no containerName, image: swap": {job: rules(onExit(fail, "", notIn, 0, 1)), mainExit: 1, sidecar: markBoth, want: swap},
		"FailJob NotIn [0 1], no containerName, no image: settle": {job: rules(onExit(fail, "", notIn, 0, 1)), mainExit: 1, sidecar: []podtest.Option{markCRR},
			want: settle, warns: true},
		"FailJob NotIn [0 1], no containerName, image, swap refused before: settle": {job: rules(onExit(fail, "", notIn, 0, 1)), mainExit: 1, sidecar: markBoth,
			refused: []Refusal{refusedSwap}, want: settle, warns: true},
		"FailJob NotIn [0 1] on the main, image: CRR":        {job: rules(onExit(fail, "main", notIn, 0, 1)), mainExit: 1, sidecar: markBoth, want: crr, rule: -1},
		"FailJob NotIn [0 1] on the main, no image: CRR":     {job: rules(onExit(fail, "main", notIn, 0, 1)), mainExit: 1, sidecar: []podtest.Option{markCRR}, want: crr, rule: -1},
		"FailJob NotIn [0 1] on the sidecar, image: swap":    {job: rules(onExit(fail, "proxy", notIn, 0, 1)), mainExit: 1, sidecar: markBoth, want: swap},
		"Ignore In [137 143], no containerName, image: swap": {job: rules(onExit(skip, "", in, 137, 143)), mainExit: 3, sidecar: markBoth, want: swap},
		"Ignore In [137 143], no containerName, no image: settle": {job: rules(onExit(skip, "", in, 137, 143)), mainExit: 3, sidecar: []podtest.Option{markCRR},
			want: settle, warns: true},
		"Ignore In [137 143] on the main, image: CRR": {job: rules(onExit(skip, "main", in, 137, 143)), mainExit: 3, sidecar: markBoth, want: crr, rule: -1},
		"FailIndex In [42] before Count NotIn [0], image: swap": {job: rules(onExit(index, "", in, 42), onExit(count, "", notIn, 0)), mainExit: 1, sidecar: markBoth,
			want: swap},
		"FailIndex NotIn [0], main 1: the main's own exit decides, CRR": {job: rules(onExit(index, "", notIn, 0)), mainExit: 1, sidecar: markBoth, want: crr, rule: -1},
		"Count In [143], no containerName, image: CRR":                  {job: rules(onExit(count, "", in, 143)), mainExit: 1, sidecar: markBoth, want: crr, rule: -1},
		"Count In [143] before Ignore NotIn [0] on the main, image: swap": {job: rules(onExit(count, "", in, 143), onExit(skip, "main", notIn, 0)), mainExit: 1,
			sidecar: markBoth, want: swap},
		"Job without policy, image: CRR": {job: &JobFacts{Name: "ns/j"}, mainExit: 1, sidecar: markBoth, want: crr, rule: -1},
		"mains succeeded, image: CRR":    {job: rules(onExit(fail, "", notIn, 0, 1)), mainExit: 0, sidecar: markBoth, want: crr, rule: -1},
	} {
		t.Run(name, func(t *testing.T) {
			pod := podtest.Pod("p").OwnedByJob("j").Container("main", exited(tc.mainExit)).
				Container("proxy", append(append([]podtest.Option{}, tc.sidecar...), podtest.Running())...).Build()
			node := normal
			if tc.node != nil {
				node = *tc.node
			}
			plan := Decide(Input{Pod: pod, Node: node, CRRAPI: true, Now: now, Policy: DefaultPolicy(), Job: tc.job, Refusals: tc.refused})
			if len(plan.Actions) != 1 || plan.Actions[0].Kind != tc.want {
				t.Fatalf("actions = %+v, want one %s (%s)", plan.Actions, tc.want, plan.Reason)
			}
			a := plan.Actions[0]
			switch {
			case tc.rule < 0 && (plan.JobVerdict != nil || a.JobRule != ""):
				t.Errorf("JobVerdict %v, action's rule %q: want none (no rule reads the stop)", plan.JobVerdict, a.JobRule)
			case tc.rule >= 0 && (plan.JobVerdict == nil || plan.JobVerdict.Rule != tc.rule || a.JobRule != plan.JobVerdict.String()):
				t.Errorf("JobVerdict %v, action's rule %q: want rule %d named on the action", plan.JobVerdict, a.JobRule, tc.rule)
			}
			if tc.want == swap {
				if diff := cmp.Diff([]Swap{{Index: 1, Container: "proxy", From: "example.com/proxy:1", To: quickExit}}, a.Swaps); diff != "" {
					t.Errorf("swaps differ (-want +got):\n%s", diff)
				}
			}
			warned := false
			for _, p := range plan.Problems {
				if p.Reason == ReasonJobPolicyReadsSidecarExit {
					warned = true
					for _, w := range []string{plan.JobVerdict.String(), "containerName", EnvTerminateWithImage} {
						if !strings.Contains(p.Message, w) {
							t.Errorf("Warning %q does not say %q", p.Message, w)
						}
					}
				}
			}
			if warned != tc.warns {
				t.Errorf("Warning %s: %v, want %v (problems %+v)", ReasonJobPolicyReadsSidecarExit, warned, tc.warns, plan.Problems)
			}
		})
	}
}

// Only the sidecars whose CRR exit a rule could read change way: the others
// keep their CRR, whose exit no rule reads.
func TestDecideSwapsOnlyTheSidecarsTheJobsRuleReads(t *testing.T) {
	pod := podtest.Pod("p").OwnedByJob("j").Container("main", exited(1)).
		Container("proxy", markCRR, markImage, podtest.Running()).Container("log", markCRR, markImage, podtest.Running()).Build()
	job := &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExit(fail, "proxy", notIn, 0, 1)}}}
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), Job: job})
	var got []string
	for _, a := range plan.Actions {
		got = append(got, string(a.Kind)+" "+strings.Join(a.Containers, ","))
	}
	want := []string{string(ActionCreateCRR) + " log", string(ActionSwapImage) + " proxy"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions differ (-want +got):\n%s\n%s", diff, plan.Reason)
	}
}

// In a stop order, the swap that replaces a CRR is the stage's stop and
// carries the stage's mark, as any swap of a stage does.
func TestDecideSwapForTheJobKeepsTheStopOrder(t *testing.T) {
	pod := podtest.Pod("p").OwnedByJob("j").Annotate(AnnotationStopOrder, "proxy").Container("main", exited(1)).
		Container("proxy", markCRR, markImage, podtest.Running()).Container("log", markCRR, podtest.Running()).Build()
	job := &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExit(skip, "proxy", in, 137, 143)}}}
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), Job: job})
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != ActionCreateCRR || plan.Actions[0].Containers[0] != "log" {
		t.Fatalf("stage 0: actions %+v, want the CRR of log (%s)", plan.Actions, plan.Reason)
	}
	pod = podtest.Pod("p").OwnedByJob("j").Annotate(AnnotationStopOrder, "proxy").Container("main", exited(1)).
		Container("proxy", markCRR, markImage, podtest.Running()).Container("log", markCRR, exited(143)).Build()
	plan = Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), Job: job})
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != ActionSwapImage || plan.Actions[0].Stage != 1 || plan.Actions[0].StageMark == "" || plan.Actions[0].JobRule == "" {
		t.Fatalf("stage 1: actions %+v, want proxy's swap with stage 1's mark and the rule (%s)", plan.Actions, plan.Reason)
	}
}

func TestExplainSaysTheStopIsASwapBecauseOfTheJobsRule(t *testing.T) {
	pod := podtest.Pod("p").OwnedByJob("j").Container("main", exited(3)).Container("proxy", markCRR, markImage, podtest.Running()).Build()
	job := &JobFacts{Name: "ns/j", Policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExit(skip, "", in, 137, 143)}}}
	var b strings.Builder
	if err := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), Job: job}).Explain(&b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`Job:      Job ns/j's podFailurePolicy rule 0 (Ignore) would read sidecar "proxy"'s exit code 143`,
		"so [proxy] are stopped by the quick-exit image swap, whose exit 0 no rule reads",
		"Action:   image swap stops [proxy], not a ContainerRecreateRequest, whose exit code the Job's podFailurePolicy could read"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("explain lacks %q:\n%s", w, b.String())
		}
	}
}
