package decision_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A sidecar whose RestartAllContainers rule (KEP-5532, on by default from
// Kubernetes 1.36) matches an exit a stop produces is never stopped: that
// stop would make the kubelet run the finished mains again. A rule that
// cannot match 0, 143 or 137 does not block the stop.
func TestASidecarWhoseStopWouldRestartThePodIsNeverStopped(t *testing.T) {
	never := corev1.ContainerRestartPolicyNever
	in, notIn := corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn
	all, restart := corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleActionRestart
	rule := func(a corev1.ContainerRestartRuleAction, op corev1.ContainerRestartRuleOnExitCodesOperator, v ...int32) podtest.Option {
		return podtest.Rule(a, op, v...)
	}
	cases := map[string]struct {
		sidecar []podtest.Option
		onFail  bool
		node    Node
		// blocked: the Warning names this exit code; else the stop is made.
		blocked bool
		exit    int32
	}{
		"RestartAllContainers on 143: no CRR": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(all, in, 143)}, blocked: true, exit: 143,
		},
		"RestartAllContainers on 143: no swap on a virtual node": {
			sidecar: []podtest.Option{markImage, podtest.Policy(never), rule(all, in, 143)}, node: virtual, blocked: true, exit: 143,
		},
		"RestartAllContainers on 137: no CRR": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(all, in, 137)}, blocked: true, exit: 137,
		},
		"RestartAllContainers on 0: no swap (the quick-exit image exits 0)": {
			sidecar: []podtest.Option{markImage, podtest.Policy(never), rule(all, in, 0)}, node: virtual, blocked: true, exit: 0,
		},
		"RestartAllContainers on any exit but 0: blocked by 143": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(all, notIn, 0)}, blocked: true, exit: 143,
		},
		"RestartAllContainers on any exit but 0 under pod OnFailure": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(all, notIn, 0)}, onFail: true, blocked: true, exit: 143,
		},
		"RestartAllContainers on 42 only: the CRR is made": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(all, in, 42)},
		},
		"RestartAllContainers on 42 only: the swap is made on a virtual node": {
			sidecar: []podtest.Option{markImage, podtest.Policy(never), rule(all, in, 42)}, node: virtual,
		},
		"RestartAllContainers on everything but 0, 137 and 143: the CRR is made": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(all, notIn, 0, 137, 143)},
		},
		"a Restart rule on 143 first: the container restarts alone, a failed kill to follow through, not blocked": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(restart, in, 143), rule(all, in, 143)},
		},
		"RestartAllContainers on 143 behind a Restart rule on 0: blocked by exit 0 first": {
			sidecar: []podtest.Option{markCRR, podtest.Policy(never), rule(restart, in, 0), rule(all, in, 143)}, blocked: true, exit: 0,
		},
		"a RestartAllContainers rule without the container's own policy: the kubelet's pod-wide check reads it all the same": {
			sidecar: []podtest.Option{markCRR, rule(all, in, 143)}, blocked: true, exit: 143,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := podtest.Pod("p")
			if tc.onFail {
				b = b.OnFailure()
			}
			pod := b.Container("main", exited(0)).Container("log", tc.sidecar...).Build()
			node := tc.node
			if node.Name == "" {
				node = normal
			}
			plan := Decide(Input{Pod: pod, Node: node, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
			assertOnlySidecarsTouched(t, plan)
			if !tc.blocked {
				if plan.Verdict != VerdictAct || len(plan.Actions) != 1 {
					t.Fatalf("verdict %s, actions %v: want one stop of the sidecar", plan.Verdict, plan.Actions)
				}
				for _, p := range plan.Problems {
					if p.Reason == ReasonSidecarKillRestartsPod {
						t.Errorf("warning %s for a rule a stop cannot match: %s", p.Reason, p.Message)
					}
				}
				return
			}
			if plan.Verdict != VerdictNoPath || len(plan.Actions) != 0 {
				t.Fatalf("verdict %s, actions %v: want no stop at all", plan.Verdict, plan.Actions)
			}
			if len(plan.Problems) != 1 {
				t.Fatalf("problems %v, want one Warning", plan.Problems)
			}
			p := plan.Problems[0]
			wantReason := ReasonSidecarKillRestartsPod
			if tc.exit == 0 && !strings.Contains(p.Message, "RestartAllContainers") {
				wantReason = ReasonSidecarRestartsAfterKill
			}
			if p.Reason != wantReason {
				t.Errorf("reason %s, want %s (%s)", p.Reason, wantReason, p.Message)
			}
			if wantReason == ReasonSidecarKillRestartsPod {
				for _, want := range []string{`"log"`, "RestartAllContainers", fmt.Sprintf("exit %d", tc.exit), "run the finished main containers again", "Exclude 0, 137 and 143"} {
					if !strings.Contains(p.Message, want) {
						t.Errorf("warning lacks %q: %s", want, p.Message)
					}
				}
			}
			out := explain(t, plan)
			if !strings.Contains(out, `sidecar "log" follows `) || !strings.Contains(out, "never stopped") {
				t.Errorf("explain does not say the sidecar is never stopped:\n%s", out)
			}
		})
	}
}

// An ignore-exit-code sidecar whose stop would restart the pod: the phase is
// still settled (no stop), and past the grace period no kill of ours follows;
// the kubelet stops a terminal pod's containers without restarting any.
func TestASettledPodsBlockedSidecarIsLeftToTheKubelet(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).
		Container("proxy", markCRR, ignoreRC, podtest.Policy(corev1.ContainerRestartPolicyNever),
			podtest.Rule(corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleOnExitCodesOpIn, 143)).Build()
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if plan.Verdict != VerdictAct || len(plan.Actions) != 1 || plan.Actions[0].Kind != ActionSettlePhase {
		t.Fatalf("before settling: verdict %s, actions %v; want the phase settled", plan.Verdict, plan.Actions)
	}
	settled := podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
		Container("main", exited(0)).
		Container("proxy", markCRR, ignoreRC, podtest.Policy(corev1.ContainerRestartPolicyNever),
			podtest.Rule(corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleOnExitCodesOpIn, 143)).Build()
	plan = Decide(Input{Pod: settled, Node: normal, CRRAPI: true, Now: exitAt.Add(41 * time.Second), Policy: DefaultPolicy()})
	if len(plan.Actions) != 0 || plan.Verdict != VerdictInProgress {
		t.Fatalf("past the grace period: verdict %s, actions %v; want no stop", plan.Verdict, plan.Actions)
	}
}

// The Warning names the rule that blocks the stop by its place in the
// container's list, counted from 1 as the pod's author reads it.
func TestABlockedStopNamesTheBlockingRuleByItsPlace(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Policy(corev1.ContainerRestartPolicyNever),
		podtest.Rule(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, 42),
		podtest.Rule(corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleOnExitCodesOpIn, 143)).Build()
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if len(plan.Problems) != 1 || !strings.Contains(plan.Problems[0].Message, "its rule 2 (RestartAllContainers on exit codes In [143])") {
		t.Fatalf("problems %v, want one naming rule 2, the RestartAllContainers rule", plan.Problems)
	}
}
