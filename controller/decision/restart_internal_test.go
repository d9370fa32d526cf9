package decision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRestartsAfterKillAsksEveryExitAStopProduces(t *testing.T) {
	never := corev1.ContainerRestartPolicyNever
	c := &corev1.Container{Name: "s", RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{137}},
	}}}
	r, blocked := restartsAfterKill(corev1.RestartPolicyNever, c)
	if !blocked || !r.AllContainers || r.Exit != 137 {
		t.Fatalf("restartsAfterKill = %+v, %v; want blocked by exit 137", r, blocked)
	}
	c.RestartPolicyRules[0].ExitCodes.Values = []int32{1}
	if r, blocked := restartsAfterKill(corev1.RestartPolicyNever, c); blocked || r.Again {
		t.Fatalf("restartsAfterKill = %+v, %v; want a stop allowed", r, blocked)
	}
}
