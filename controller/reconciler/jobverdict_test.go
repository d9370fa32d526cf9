package reconciler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// jobAPI is apiFake that serves one Job to live reads and counts them, and
// keeps the events' messages.
type jobAPI struct {
	*apiFake
	job      *batchv1.Job
	reads    int
	messages []string
}

func (a *jobAPI) Event(obj runtime.Object, eventtype, reason, message string) {
	a.apiFake.Event(obj, eventtype, reason, message)
	a.messages = append(a.messages, eventtype+" "+reason+": "+message)
}

func (a *jobAPI) LiveJob(_ context.Context, _, name string) (*batchv1.Job, error) {
	a.reads++
	return a.job.DeepCopy(), nil
}

const quickExitImage = "ghcr.io/sidecar-terminator/quick-exit:v1"

// failedJobPod is a pod of Job j whose main exited 1 and whose sidecar
// carries the CRR mark and a quick-exit image.
func failedJobPod(name string) *corev1.Pod {
	return podtest.Pod(name).Namespace("default").UID(name+"-uid").Node("normal").OwnedByJob("j").
		Container("main", podtest.Exited(1, podtest.Epoch.Add(10*time.Second))).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, quickExitImage), podtest.Running()).Build()
}

func newJobAPI(t *testing.T, rule batchv1.PodFailurePolicyRule, pods ...*corev1.Pod) (*jobAPI, *reconciler.Reconciler, *reconciler.Metrics) {
	a, _, _ := newAPI(t, pods...)
	ja := &jobAPI{apiFake: a, job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "j", UID: types.UID("uid-job-j")},
		Spec: batchv1.JobSpec{PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{rule}}}}}
	m := reconciler.NewMetrics(nil)
	cfg := reconciler.DefaultConfig()
	cfg.Policy.AllowedQuickExitImages = []string{quickExitImage}
	return ja, reconciler.New(cfg, ja, ja, ja, ja, m, a.clock), m
}

func onExitCodes(action batchv1.PodFailurePolicyAction, container string, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
	req := &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}
	if container != "" {
		req.ContainerName = &container
	}
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: req}
}

// The pods of one Job cost one read of it between them: its
// podFailurePolicy is immutable. Where the rule reads every container, each
// pod's sidecar is stopped by the swap, with a Normal event naming the rule;
// where it names the main container, by the CRR.
func TestTheJobIsReadOncePerJobAndItsRuleChoosesTheStop(t *testing.T) {
	for name, tc := range map[string]struct {
		rule   batchv1.PodFailurePolicyRule
		write  string
		result string
	}{
		"rule on every container: swap": {rule: onExitCodes(batchv1.PodFailurePolicyActionFailJob, "", batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0, 1),
			write: "patch", result: reconciler.JobReadSwap},
		"rule on the main: CRR": {rule: onExitCodes(batchv1.PodFailurePolicyActionFailJob, "main", batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0, 1),
			write: "crr", result: reconciler.JobReadNoChange},
	} {
		t.Run(name, func(t *testing.T) {
			a, rec, m := newJobAPI(t, tc.rule, failedJobPod("p1"), failedJobPod("p2"))
			mustSync(t, rec, "p1")
			mustSync(t, rec, "p2")
			if a.reads != 1 {
				t.Errorf("%d reads of the Job for two of its pods, want 1", a.reads)
			}
			if got := strings.Join(a.writes, ","); got != tc.write+","+tc.write {
				t.Errorf("writes %s, want %s for each pod", got, tc.write)
			}
			if got := testutil.ToFloat64(m.JobReads.WithLabelValues(tc.result)); got != 1 {
				t.Errorf("job_reads_total{result=%q} = %v, want 1", tc.result, got)
			}
			if tc.write == "patch" {
				if img := a.pods["p1"].Spec.Containers[1].Image; img != quickExitImage {
					t.Errorf("p1's proxy runs %s after the sync, want the quick-exit image", img)
				}
				want := `Normal SidecarTerminating: Stopping sidecars [proxy] by swapping their image for the quick-exit image ` + quickExitImage +
					`, not by a ContainerRecreateRequest: Job default/j's podFailurePolicy rule 0 (FailJob) would read sidecar "proxy"'s exit code 143 from the stop`
				if len(a.messages) == 0 || !strings.HasPrefix(a.messages[0], want) {
					t.Errorf("events %q, want first one starting %q", a.messages, want)
				}
			}
		})
	}
}
