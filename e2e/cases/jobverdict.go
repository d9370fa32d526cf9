package cases

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// JobVerdictFeatures run the Job's podFailurePolicy against the real Job
// controller (docs/job-verdict.md): a main that fails with a code the
// policy retries (FailJob NotIn [0 1] on the main container), and a sidecar
// that ignores SIGTERM, stopped by a CRR (so it ends 137). The stop reads
// nothing: the Job is retried until backoffLimit, and the apiserver's audit
// log (auditLog()) shows no settle. The rules that read every container
// (FailJob NotIn [0 1], Ignore In [137 143]) do not yet end as the mains
// alone would on the real cluster (docs/job-verdict.md, "On the real
// cluster"), so they are not among these cases.
func JobVerdictFeatures(auditLog func() string) []features.Feature {
	mainOnly := onExitCodes(batchv1.PodFailurePolicyActionFailJob, "main", batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0, 1)
	return []features.Feature{
		jobVerdictFeature("job-verdict-main-only", mainOnly, 1, false, auditLog),
	}
}

func onExitCodes(action batchv1.PodFailurePolicyAction, container string, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
	req := &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}
	if container != "" {
		req.ContainerName = &container
	}
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: req}
}

// jobVerdictBackoffLimit: three pods, each failed by its main's exit 1.
const jobVerdictBackoffLimit = 2

func jobVerdictFeature(name string, rule batchv1.PodFailurePolicyRule, mainExit int, settles bool, auditLog func() string) features.Feature {
	backoff := int32(jobVerdictBackoffLimit)
	js := JobSpec{Name: name, BackoffLimit: &backoff, GracePeriodSeconds: 3,
		Containers: []Container{Main("main", 1, mainExit), Sidecar("proxy", "ignore", true)}}
	return features.New(name).
		WithLabel("type", "job-verdict").
		Setup(createNamespace(&js)).
		Assess("the Job is retried and fails by backoffLimit, never by the stop's exit", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			job := js.Build()
			job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{rule}}
			if _, err := cl.Kube.BatchV1().Jobs(js.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create job %s: %v", js.Name, err)
			}
			j, err := waitJobFinished(ctx, cl, js.Namespace, js.Name, 4*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var failed *batchv1.JobCondition
			for i := range j.Status.Conditions {
				if c := j.Status.Conditions[i]; c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
					failed = &c
				}
			}
			if failed == nil || failed.Reason != batchv1.JobReasonBackoffLimitExceeded {
				t.Errorf("Job conditions %+v: want Failed by %s (the stop's exit must not fail it by %s)", j.Status.Conditions, batchv1.JobReasonBackoffLimitExceeded, batchv1.JobReasonPodFailurePolicy)
			}
			pods, err := JobPods(ctx, cl.Kube, js.Namespace, js.Name)
			if err != nil {
				t.Fatal(err)
			}
			if len(pods) != jobVerdictBackoffLimit+1 || j.Status.Failed != jobVerdictBackoffLimit+1 {
				t.Errorf("%d pods, status.failed %d: want %d of each", len(pods), j.Status.Failed, jobVerdictBackoffLimit+1)
			}
			for _, p := range pods {
				if got := hasCondition(&p, "SidecarTerminated"); got != settles {
					t.Errorf("pod %s: SidecarTerminated condition %v, want %v (phase settled before the stop)", p.Name, got, settles)
				}
				code, _ := ExitCode(&p, "proxy")
				t.Logf("pod %s: phase %s, main exit %d, proxy exit %d, settled %v", p.Name, p.Status.Phase, mainExit, code, hasCondition(&p, "SidecarTerminated"))
			}
			// The controller's writes in the namespace, from the audit log:
			// a settle is a patch of pods/status; none where no rule reads the stop.
			writes, err := cluster.MutatingRequestsIn(auditLog(), cluster.ControllerServiceAccountUser, js.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			settlesSeen := 0
			for _, w := range writes {
				if strings.HasPrefix(w, "patch pods/status ") {
					settlesSeen++
				}
			}
			if want := map[bool]int{true: jobVerdictBackoffLimit + 1, false: 0}[settles]; settlesSeen != want {
				t.Errorf("the controller's writes in %s: %v; want %d status patches (settles)", js.Namespace, writes, want)
			}
			t.Logf("the controller's writes in %s: %v", js.Namespace, writes)
			return ctx
		}).
		Teardown(deleteNamespace(&js)).
		Feature()
}

func waitJobFinished(ctx context.Context, cl Clients, ns, name string, timeout time.Duration) (*batchv1.Job, error) {
	deadline := time.Now().Add(timeout)
	for {
		j, err := cl.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get job %s/%s: %w", ns, name, err)
		}
		if JobFinished(j) != "" {
			return j, nil
		}
		if time.Now().After(deadline) {
			return j, fmt.Errorf("job %s/%s not finished after %s: %+v", ns, name, timeout, j.Status)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return j, err
		}
	}
}
