package cases

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// RestartRuleFeatures are the rows on a node that runs kruise-daemon: one
// CRR, created after the main's last exit.
func RestartRuleFeatures() []features.Feature {
	var out []features.Feature
	for _, r := range ruleShapes("main") {
		phase := corev1.PodSucceeded
		if r.job == batchv1.JobFailed {
			phase = corev1.PodFailed
		}
		js := JobSpec{Name: "rules-" + r.name, RestartPolicy: r.policy, Containers: []Container{r.main, Sidecar("proxy", "exit:0", true)}}
		want := Expect{Job: r.job, Phase: phase, ExitCodes: map[string]int32{"main": r.exit, "proxy": 0}, CRRContainers: []string{"proxy"}, Event: true}
		out = append(out, features.New("restart rules: "+r.name).WithLabel("type", "job").
			Setup(createNamespaceAndJob(&js)).
			Assess("the sidecar is stopped by one CRR, after the main's last exit", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
				obs := RunAndCheck(ctx, t, mustClients(t, cfg), js.Namespace, js.Name, 4*time.Minute, want)
				obs.checkRestartsThenOneCRR(t, "main", r.restarts)
				return ctx
			}).
			Teardown(deleteNamespace(&js)).Feature())
	}
	return out
}

// checkRestartsThenOneCRR: the main ran restarts+1 times, and no CRR was
// created before its last exit (Check already demands exactly one).
func (o *Observation) checkRestartsThenOneCRR(t *testing.T, main string, restarts int32) {
	t.Helper()
	s, ok := ContainerState(o.Pod, main)
	if !ok || s.RestartCount != restarts || s.State.Terminated == nil {
		t.Fatalf("main status %+v, want terminated after %d restarts", s, restarts)
	}
	finished := s.State.Terminated.FinishedAt.Time
	for name, created := range o.CRRCreated {
		// Both times have one-second resolution; a CRR made at an earlier
		// exit is at least a restart back-off (10 s) older.
		if created.Before(finished) {
			t.Errorf("CRR %s created at %s, before the main's last exit at %s", name, created, finished)
		}
	}
}
