package sim

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Scenarios of the container restart rules (KEP-5307): one per row of the
// table of what the kubelet does when a container's own restartPolicy or
// restartPolicyRules differ from the pod's. They join the named suite here,
// in a file of their own, so the suite's table stays readable.
func init() { Scenarios = append(Scenarios, restartRuleScenarios...) }

func withPolicy(c C, p corev1.ContainerRestartPolicy, rules ...corev1.ContainerRestartRule) C {
	c.Policy, c.Rules = &p, rules
	return c
}

func restartOn(codes ...int32) corev1.ContainerRestartRule {
	return corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}
}

// restartAllOn is a RestartAllContainers rule (KEP-5532) on exit codes
// In codes (NotIn when notIn).
func restartAllOn(notIn bool, codes ...int32) corev1.ContainerRestartRule {
	r := restartOn(codes...)
	r.Action = corev1.ContainerRestartRuleActionRestartAllContainers
	if notIn {
		r.ExitCodes.Operator = corev1.ContainerRestartRuleOnExitCodesOpNotIn
	}
	return r
}

func restartNotIn(codes ...int32) corev1.ContainerRestartRule {
	r := restartOn(codes...)
	r.ExitCodes.Operator = corev1.ContainerRestartRuleOnExitCodesOpNotIn
	return r
}

var restartRuleScenarios = []Scenario{
	{Name: "rules-never-main-onfailure", Purpose: "pod Never, main restartPolicy OnFailure fails then succeeds: the sidecar is stopped only after the last exit",
		Nodes: mixedNodes, Templates: []Template{
			never("r-of", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 1, 1, 0), corev1.ContainerRestartPolicyOnFailure), sidecar("proxy", "exit:0", markCRR)),
			never("r-of-vk", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 1, 0), corev1.ContainerRestartPolicyOnFailure), sidecar("proxy", "exit:0", markImage)).virtual()}},
	{Name: "rules-never-restart-on-42", Purpose: "pod Never, main Never with rule Restart on exit 42, exits 42 then 0 (or 3): no stop until the exit no rule restarts",
		Nodes: mixedNodes, Templates: []Template{
			never("r-42", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 42, 0), corev1.ContainerRestartPolicyNever, restartOn(42)), sidecar("proxy", "exit:0", markCRR)),
			never("r-42-fail", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 42, 42, 3), corev1.ContainerRestartPolicyNever, restartOn(42)), sidecar("proxy", "exit:0", markCRR, markImage)),
			never("r-42-vk", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 42, 0), corev1.ContainerRestartPolicyNever, restartOn(42)), sidecar("proxy", "exit:0", markImage)).virtual()}},
	{Name: "rules-onfailure-main-always", Purpose: "pod OnFailure, main restartPolicy Always exits 0 and is restarted: never a stop; the Job's backoffLimit ends it",
		Nodes: mixedNodes, Templates: []Template{
			func() Template {
				t := onFailure("r-always", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 0), corev1.ContainerRestartPolicyAlways), sidecar("proxy", "exit:0", markCRR))
				t.BackoffLimit = 2
				return t
			}(),
			func() Template {
				t := onFailure("r-always-vk", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 0), corev1.ContainerRestartPolicyAlways), sidecar("proxy", "exit:0", markImage)).virtual()
				t.BackoffLimit = 2
				return t
			}()}},
	{Name: "rules-onfailure-main-never", Purpose: "pod OnFailure, main restartPolicy Never exits 1: it is done, the sidecar is stopped and the pod fails rather than hangs",
		Nodes: mixedNodes, Templates: []Template{
			onFailure("r-nev", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 1), corev1.ContainerRestartPolicyNever), sidecar("proxy", "exit:0", markCRR)),
			onFailure("r-nev-vk", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 1), corev1.ContainerRestartPolicyNever), sidecar("proxy", "exit:0", markImage)).virtual()}},
	{Name: "rules-ignore-exit-code", Purpose: "pod Never, ignore-exit-code sidecar, main rule Restart on 42 exits 42 then 0: the phase is settled only after the last exit",
		Nodes: normalNodes, Templates: []Template{
			never("r-ign", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 42, 0), corev1.ContainerRestartPolicyNever, restartOn(42)), sidecar("logger", "ignore", markCRR, markIgnore)),
			never("r-ign-fail", withPolicy(mainC("main", 2*time.Second, 10*time.Second, 42, 5), corev1.ContainerRestartPolicyNever, restartNotIn(0, 5)), sidecar("logger", "ignore", markCRR, markIgnore))}},
	{Name: "rules-sidecar-own-policy", Purpose: "sidecars with their own restartPolicy: Always cannot be stopped by a kill (a Warning names native sidecars), OnFailure is stopped",
		Nodes: mixedNodes, Templates: []Template{
			never("r-side-always", job(), withPolicy(sidecar("proxy", "exit:0", markCRR, markImage), corev1.ContainerRestartPolicyAlways)).expect(ExpectWarning),
			never("r-side-of", job(), withPolicy(sidecar("proxy", "exit:0", markCRR), corev1.ContainerRestartPolicyOnFailure)),
			onFailure("r-side-never", job(), withPolicy(sidecar("proxy", "exit:1", markCRR), corev1.ContainerRestartPolicyNever))}},
	{Name: "rules-sidecar-restart-all", Purpose: "sidecars with a RestartAllContainers rule (on by default from Kubernetes 1.36): one matching an exit a stop produces is never stopped (a Warning, the mains never run again); one matching only 42 is stopped",
		Nodes: mixedNodes, Templates: []Template{
			never("r-all-143", job(), withPolicy(sidecar("proxy", "exit:143", markCRR, markImage), corev1.ContainerRestartPolicyNever, restartAllOn(false, 143))).expect(ExpectWarning),
			never("r-all-not0", job(), withPolicy(sidecar("proxy", "exit:0", markCRR), corev1.ContainerRestartPolicyNever, restartAllOn(true, 0))).expect(ExpectWarning),
			never("r-all-143-vk", job(), withPolicy(sidecar("proxy", "exit:0", markImage), corev1.ContainerRestartPolicyNever, restartAllOn(false, 0, 143))).virtual().expect(ExpectWarning),
			onFailure("r-all-42", job(), withPolicy(sidecar("proxy", "exit:0", markCRR), corev1.ContainerRestartPolicyNever, restartAllOn(false, 42))),
			never("r-all-42-vk", job(), withPolicy(sidecar("proxy", "exit:143", markImage), corev1.ContainerRestartPolicyNever, restartAllOn(false, 42))).virtual()}},
}

// drawnRuleTemplates draws, for a soak run, pods whose containers carry their
// own restart policies and rules: the pod's policy, the main's policy and
// rules, its exit codes, and now and then a sidecar with a policy of its own.
// Each main's last exit code is one its rules do not restart (else the Job's
// backoffLimit ends it), so the pod can finish.
func drawnRuleTemplates(pick func(float64) bool, intn func(int) int) []Template {
	policies := []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyAlways}
	ruleSets := [][]corev1.ContainerRestartRule{nil, {restartOn(42)}, {restartNotIn(0)}, {restartOn(42, 137)}, {restartOn(3), restartNotIn(0, 1)}}
	codes := []int32{0, 1, 3, 42}
	var out []Template
	for i := 0; i < 6; i++ {
		t := Template{Name: "soak-rules-" + string(rune('a'+i)), RestartPolicy: corev1.RestartPolicyNever}
		if pick(0.5) {
			t.RestartPolicy = corev1.RestartPolicyOnFailure
		}
		main := mainC("main", 2*time.Second, 20*time.Second)
		if pick(0.8) {
			main = withPolicy(main, policies[intn(len(policies))], ruleSets[intn(len(ruleSets))]...)
		}
		main.ExitCodes = nil
		for n := 1 + intn(3); n > 0; n-- {
			main.ExitCodes = append(main.ExitCodes, codes[intn(len(codes))])
		}
		spec := corev1.Container{RestartPolicy: main.Policy, RestartPolicyRules: main.Rules}
		if decision.RestartsAfter(t.RestartPolicy, &spec, main.ExitCodes[len(main.ExitCodes)-1]) {
			t.BackoffLimit = 3
		}
		side := sidecar("proxy", "exit:0", markCRR, markImage)
		switch {
		case pick(0.15):
			side = withPolicy(side, corev1.ContainerRestartPolicyAlways)
			t.Expect = ExpectWarning
		case pick(0.2):
			side = withPolicy(side, corev1.ContainerRestartPolicyOnFailure)
		case pick(0.15):
			// A RestartAllContainers rule: matching an exit a stop produces
			// (0, 143, 137) forbids any stop; 42 alone does not.
			rules := [][]corev1.ContainerRestartRule{{restartAllOn(false, 143)}, {restartAllOn(true, 0)}, {restartAllOn(false, 137)}, {restartAllOn(false, 42)}}
			r := rules[intn(len(rules))]
			side = withPolicy(side, corev1.ContainerRestartPolicyNever, r...)
			if r[0].ExitCodes.Values[0] != 42 {
				t.Expect = ExpectWarning
			}
		}
		t.Containers = []C{main, side}
		t.Virtual = pick(0.3)
		out = append(out, t)
	}
	return out
}
