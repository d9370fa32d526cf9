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
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// JobVerdictFeatures run the Job's podFailurePolicy against the real Job
// controller (docs/job-verdict.md): a main that fails with a code the
// policy retries or counts, and a sidecar that ignores SIGTERM and carries a
// quick-exit image as well as the CRR mark. Where a rule could read a CRR's
// exit (no containerName), the controller stops the sidecar by the swap,
// whose exit 0 no rule reads; where the rule names the main container, by
// the CRR; where no swap is possible, it settles the phase first. Every way
// the Job is retried and fails by backoffLimit, never by the stop's exit,
// and the audit log (auditLog()) shows the writes and Job reads each way
// costs.
func JobVerdictFeatures(auditLog func() string) []features.Feature {
	in, notIn := batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn
	failJob, ignore := batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore
	withImage := Sidecar("proxy", "ignore", true).With(EnvWhenJobExitWithImage, images.QuickExit.Ref)
	return []features.Feature{
		jobVerdictFeature(jobVerdictCase{name: "job-verdict-main-only", rule: onExitCodes(failJob, "main", notIn, 0, 1),
			mainExit: 1, sidecar: withImage, stop: stopByCRR}, auditLog),
		jobVerdictFeature(jobVerdictCase{name: "job-verdict-failjob-any", rule: onExitCodes(failJob, "", notIn, 0, 1),
			mainExit: 1, sidecar: withImage, stop: stopBySwap}, auditLog),
		jobVerdictFeature(jobVerdictCase{name: "job-verdict-ignore-any", rule: onExitCodes(ignore, "", in, 137, 143),
			mainExit: 3, sidecar: withImage, stop: stopBySwap}, auditLog),
		// No quick-exit image: no swap is possible, so the phase is settled
		// from the mains before the stop (docs/job-verdict.md, "The settle,
		// and its limit"). Ignore reads a pod once, when it is counted.
		jobVerdictFeature(jobVerdictCase{name: "job-verdict-ignore-settle", rule: onExitCodes(ignore, "", in, 137, 143),
			mainExit: 3, sidecar: Sidecar("proxy", "ignore", true), stop: stopBySettle}, auditLog),
	}
}

// logJobPods logs what a Job that did not finish is waiting on: each pod's
// phase, finalizers, conditions and container states.
func logJobPods(ctx context.Context, t *testing.T, cl Clients, ns, job string) {
	pods, err := JobPods(ctx, cl.Kube, ns, job)
	if err != nil {
		t.Logf("list the pods of Job %s/%s: %v", ns, job, err)
		return
	}
	for _, p := range pods {
		var conds, states []string
		for _, c := range p.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch st := cs.State; {
			case st.Terminated != nil:
				states = append(states, fmt.Sprintf("%s terminated %d", cs.Name, st.Terminated.ExitCode))
			case st.Running != nil:
				states = append(states, cs.Name+" running")
			default:
				states = append(states, cs.Name+" waiting")
			}
		}
		t.Logf("pod %s: phase %s, deleted %v, finalizers %v, conditions %v, containers %v", p.Name, p.Status.Phase, p.DeletionTimestamp != nil, p.Finalizers, conds, states)
	}
}

func onExitCodes(action batchv1.PodFailurePolicyAction, container string, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
	req := &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}
	if container != "" {
		req.ContainerName = &container
	}
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: req}
}

// jobVerdictBackoffLimit: three pods, each failed by its main's exit.
const jobVerdictBackoffLimit = 2

// How a case's sidecars are stopped, as the audit log shows it.
const (
	stopByCRR    = "crr"
	stopBySwap   = "swap"
	stopBySettle = "settle"
)

type jobVerdictCase struct {
	name     string
	rule     batchv1.PodFailurePolicyRule
	mainExit int
	sidecar  Container
	// stop: how each pod's sidecar is stopped (stopBy*).
	stop string
}

func jobVerdictFeature(c jobVerdictCase, auditLog func() string) features.Feature {
	backoff := int32(jobVerdictBackoffLimit)
	js := JobSpec{Name: c.name, BackoffLimit: &backoff, GracePeriodSeconds: 3,
		Containers: []Container{Main("main", 1, c.mainExit), c.sidecar}}
	return features.New(c.name).
		WithLabel("type", "job-verdict").
		Setup(createNamespace(&js)).
		Assess("the Job counts each pod on its main's exit and fails by backoffLimit, never by the stop's exit", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			job := js.Build()
			job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{c.rule}}
			if _, err := cl.Kube.BatchV1().Jobs(js.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create job %s: %v", js.Name, err)
			}
			j, err := waitJobFinished(ctx, cl, js.Namespace, js.Name, 3*time.Minute)
			if err != nil {
				logJobPods(ctx, t, cl, js.Namespace, js.Name)
				t.Fatal(err)
			}
			var failed *batchv1.JobCondition
			for i := range j.Status.Conditions {
				if cond := j.Status.Conditions[i]; cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
					failed = &cond
				}
			}
			if failed == nil || failed.Reason != batchv1.JobReasonBackoffLimitExceeded {
				t.Errorf("Job conditions %+v: want Failed by %s (the stop's exit must not fail it by %s, nor have it ignored)", j.Status.Conditions, batchv1.JobReasonBackoffLimitExceeded, batchv1.JobReasonPodFailurePolicy)
			}
			pods, err := JobPods(ctx, cl.Kube, js.Namespace, js.Name)
			if err != nil {
				t.Fatal(err)
			}
			if len(pods) != jobVerdictBackoffLimit+1 || j.Status.Failed != jobVerdictBackoffLimit+1 {
				t.Errorf("%d pods, status.failed %d: want %d of each", len(pods), j.Status.Failed, jobVerdictBackoffLimit+1)
			}
			for _, p := range pods {
				settled := hasCondition(&p, "SidecarTerminated")
				if settled != (c.stop == stopBySettle) {
					t.Errorf("pod %s: SidecarTerminated condition %v, want %v (phase settled before the stop)", p.Name, settled, c.stop == stopBySettle)
				}
				if p.Status.Phase != corev1.PodFailed {
					t.Errorf("pod %s: phase %s, want Failed (its main exited %d)", p.Name, p.Status.Phase, c.mainExit)
				}
				// The swap restarts the sidecar alone: a terminated main of
				// a Never pod is not started again.
				if m, ok := ContainerState(&p, "main"); !ok || m.RestartCount != 0 || m.State.Terminated == nil || m.State.Terminated.ExitCode != int32(c.mainExit) {
					t.Errorf("pod %s: main %+v, want terminated with %d and never restarted", p.Name, m, c.mainExit)
				}
				code, _ := ExitCode(&p, "proxy")
				if c.stop == stopBySwap && code != 0 {
					t.Errorf("pod %s: proxy exited %d, want the quick-exit image's 0", p.Name, code)
				}
				t.Logf("pod %s: phase %s, main exit %d, proxy exit %d, settled %v", p.Name, p.Status.Phase, c.mainExit, code, settled)
			}
			checkJobVerdictRequests(t, auditLog(), js.Namespace, js.Name, c.stop, len(pods))
			return ctx
		}).
		Teardown(deleteNamespace(&js)).
		Feature()
}

// checkJobVerdictRequests holds the controller's requests in the namespace,
// from the apiserver's audit log, to the stop the case expects: per pod one
// CRR create, or one image patch, or a status patch (the settle); never a
// settle where the stop reads nothing; and one GET of the Job for all its pods.
func checkJobVerdictRequests(t *testing.T, auditLog, ns, job, stop string, pods int) {
	t.Helper()
	writes, err := cluster.MutatingRequestsIn(auditLog, cluster.ControllerServiceAccountUser, ns)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, w := range writes {
		switch {
		case strings.HasPrefix(w, "patch pods/status "):
			counts[stopBySettle]++
		case strings.HasPrefix(w, "create containerrecreaterequests "):
			counts[stopByCRR]++
		case strings.HasPrefix(w, "patch pods "):
			counts["patch pods"]++
		}
	}
	want := map[string]int{stop: pods}
	if stop == stopBySwap {
		want = map[string]int{"patch pods": pods}
	}
	if stop == stopBySettle {
		// Each settle is followed by the annotation that makes the kubelet
		// sync the settled pod. Until it does, its status manager may write
		// its cached phase back, and the pod is settled once more (seen on
		// the real node): one or two settles per pod.
		if counts[stopBySettle] < pods || counts[stopBySettle] > 2*pods || counts["patch pods"] != counts[stopBySettle] {
			t.Errorf("the controller's writes in %s: %v; want one or two settles per pod, each with its annotation", ns, writes)
		}
		want = map[string]int{stopBySettle: counts[stopBySettle], "patch pods": counts[stopBySettle]}
	}
	for _, k := range []string{stopBySettle, stopByCRR, "patch pods"} {
		if counts[k] != want[k] {
			t.Errorf("the controller's writes in %s: %v; want %d %s, got %d", ns, writes, want[k], k, counts[k])
		}
	}
	reads, err := cluster.ReadsIn(auditLog, cluster.ControllerServiceAccountUser, ns, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if len(reads) != 1 {
		t.Errorf("the controller read Job %s %d times (%v) for its %d pods; want one read (its podFailurePolicy cannot change)", job, len(reads), reads, pods)
	}
	t.Logf("the controller's writes in %s: %v; its Job reads: %d", ns, writes, len(reads))
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
