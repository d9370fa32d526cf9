package cases

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// Container restart rules (KEP-5307, on by default in Kubernetes 1.35): a
// main's own restartPolicy and restartPolicyRules, not the pod's policy,
// decide whether the kubelet runs it again. The sidecar is stopped only
// after the main's last exit: no CRR or patch before it, exactly one after.

func restartOn(codes ...int32) corev1.ContainerRestartRule {
	return corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}
}

// ruleShape is one row: the pod's policy, the main, and how it must end.
type ruleShape struct {
	name     string
	policy   corev1.RestartPolicy
	main     Container
	restarts int32 // of the main, by its own rules
	exit     int32 // the main's last exit code
	job      batchv1.JobConditionType
}

func ruleShapes(mainName string) []ruleShape {
	return []ruleShape{
		{"rule-restart-42", never, Main(mainName, 2, 0).Runs(42, 0).WithPolicy(corev1.ContainerRestartPolicyNever, restartOn(42)), 1, 0, batchv1.JobComplete},
		{"never-main-onfailure", never, Main(mainName, 2, 0).Runs(1, 0).WithPolicy(corev1.ContainerRestartPolicyOnFailure), 1, 0, batchv1.JobComplete},
		{"onfailure-main-never", onFailure, Main(mainName, 2, 1).WithPolicy(corev1.ContainerRestartPolicyNever), 0, 1, batchv1.JobFailed},
	}
}

// restartRuleFeatures are the same rows on the virtual node: one image
// patch, after the main's last exit.
func (env VirtualNodeEnv) restartRuleFeatures(sidecar Container) []features.Feature {
	var out []features.Feature
	for _, r := range ruleShapes(VirtualMain) {
		r := r
		js := VirtualJob("rules-"+r.name, r.policy, r.main, sidecar)
		if r.job == batchv1.JobFailed {
			js.BackoffLimit = nil // the first failed pod fails the Job
		}
		out = append(out, env.jobFeature(js, "image-swap", "one swap, after the main's last exit", r.job, func(ctx context.Context, t *testing.T, run *virtualRun) {
			if m, ok := ContainerState(run.pod, VirtualMain); !ok || m.RestartCount != r.restarts {
				t.Errorf("main status %+v, want %d restarts", m, r.restarts)
			}
			phase := corev1.PodSucceeded
			if r.job == batchv1.JobFailed {
				phase = corev1.PodFailed
			}
			env.checkSwapped(ctx, t, run, phase, r.exit)
		}))
	}
	return out
}
