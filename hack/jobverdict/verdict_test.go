// Package jobverdict compares the decision's rule for when a stop changes a
// Job's verdict (controller/decision/jobverdict.go) with the Job controller
// of k8s.io/kubernetes v1.37.2 itself. Its matching (matchPodFailurePolicy)
// is unexported, so the test runs the real controller against a fake
// clientset: each row is a Job with a podFailurePolicy and one failed pod,
// once with the sidecar running (the pod as the phase settle leaves it) and
// once for each exit a stop can leave; what the controller then does with the
// Job (fails it, fails the index, counts the failure or ignores it) is the
// verdict. The decision's StopChangesVerdict must be true exactly when the
// verdicts differ for some exit of the stop.
package jobverdict

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	jobcontroller "k8s.io/kubernetes/pkg/controller/job"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

const (
	in    = batchv1.PodFailurePolicyOnExitCodesOpIn
	notIn = batchv1.PodFailurePolicyOnExitCodesOpNotIn
)

func rule(action batchv1.PodFailurePolicyAction, container string, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
	req := &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}
	if container != "" {
		req.ContainerName = &container
	}
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: req}
}

// policies: each action with each operator, on every container, on the main
// and on the sidecar, and first-match-wins pairs where the order decides.
func policies() map[string][]batchv1.PodFailurePolicyRule {
	fail, index, ignore, count := batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionFailIndex,
		batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount
	out := map[string][]batchv1.PodFailurePolicyRule{}
	for _, a := range []batchv1.PodFailurePolicyAction{fail, index, ignore, count} {
		for _, c := range []string{"", "main", "proxy"} {
			out[fmt.Sprintf("%s NotIn [0 1] on %q", a, c)] = []batchv1.PodFailurePolicyRule{rule(a, c, notIn, 0, 1)}
			out[fmt.Sprintf("%s In [137 143] on %q", a, c)] = []batchv1.PodFailurePolicyRule{rule(a, c, in, 137, 143)}
			out[fmt.Sprintf("%s In [42] on %q", a, c)] = []batchv1.PodFailurePolicyRule{rule(a, c, in, 42)}
		}
	}
	out["Count In [143] on every container, then Ignore NotIn [0] on main"] = []batchv1.PodFailurePolicyRule{rule(count, "", in, 143), rule(ignore, "main", notIn, 0)}
	out["Ignore In [3] on main, then FailJob NotIn [0] on every container"] = []batchv1.PodFailurePolicyRule{rule(ignore, "main", in, 3), rule(fail, "", notIn, 0)}
	out["FailIndex In [1] on main, then FailJob NotIn [0]"] = []batchv1.PodFailurePolicyRule{rule(index, "main", in, 1), rule(fail, "", notIn, 0)}
	out["In [0] only"] = []batchv1.PodFailurePolicyRule{rule(fail, "", in, 0)}
	return out
}

var (
	mainExits = []int32{0, 1, 3, 143}
	// stopExits: what a ContainerRecreateRequest leaves (143, 137, or a
	// SIGTERM handler's own code), and the swap's 0.
	crrExits  = []int32{143, 137, 1, 42, 77}
	swapExits = []int32{0}
)

// controller runs the real Job controller against a fake clientset.
type controller struct {
	client *fake.Clientset
	n      atomic.Int64
}

func startController(t *testing.T) *controller {
	t.Helper()
	// The controller batches a Job's syncs by this period (one second);
	// here every change is its own.
	jobcontroller.SyncJobBatchPeriod = 0
	// With backoffLimitPerIndex, a failed pod keeps its finalizer until its
	// replacement is made, after the pod failure backoff (ten seconds).
	jobcontroller.DefaultJobPodFailureBackOff = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset()
	// The fake clientset does not fill in generateName, which the
	// controller's replacement pods use; without names they collide.
	var made atomic.Int64
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if pod.Name == "" {
			pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, made.Add(1))
		}
		return false, nil, nil
	})
	// Nor does it refuse a write on a stale resourceVersion, as the API
	// server does: the controller would then write a Job status read from a
	// lagging cache over a newer one and lose a count. Jobs get versions
	// here, and a status update on an old one is a Conflict.
	var version atomic.Int64
	client.PrependReactor("*", "jobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		var job *batchv1.Job
		switch a := action.(type) {
		case k8stesting.CreateAction:
			job = a.GetObject().(*batchv1.Job)
		case k8stesting.UpdateAction:
			job = a.GetObject().(*batchv1.Job)
			stored, err := client.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), job.Namespace, job.Name)
			if err == nil && stored.(*batchv1.Job).ResourceVersion != job.ResourceVersion {
				return true, nil, apierrors.NewConflict(batchv1.Resource("jobs"), job.Name, fmt.Errorf("the object has been modified"))
			}
		default:
			return false, nil, nil
		}
		job.ResourceVersion = fmt.Sprint(version.Add(1))
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	jm, err := jobcontroller.NewController(klog.NewContext(ctx, klog.Background()), client,
		factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), nil, nil)
	if err != nil {
		t.Fatalf("new Job controller: %v", err)
	}
	factory.Start(ctx.Done())
	go jm.Run(ctx, 2)
	return &controller{client: client}
}

// verdict creates a Job with the policy and one failed pod of the given
// status, and returns what the controller did with it.
func (c *controller) verdict(t *testing.T, rules []batchv1.PodFailurePolicyRule, status []corev1.ContainerStatus) string {
	t.Helper()
	n := c.n.Add(1)
	ns := fmt.Sprintf("row-%d", n)
	ctx := context.Background()
	uid := types.UID(fmt.Sprintf("job-uid-%d", n))
	labels := map[string]string{"row": ns}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: ns, UID: uid},
		Spec: batchv1.JobSpec{
			Parallelism: ptr(int32(1)), Completions: ptr(int32(1)),
			BackoffLimit:     ptr(int32(math.MaxInt32)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: rules},
			Selector:         &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main"}, {Name: "proxy"}}}},
		},
	}
	for _, r := range rules {
		if r.Action == batchv1.PodFailurePolicyActionFailIndex {
			// FailIndex needs backoffLimitPerIndex, hence an Indexed Job
			// (the API's validation): only these rows pay for the
			// controller's per-index bookkeeping.
			indexed := batchv1.IndexedCompletion
			job.Spec.CompletionMode, job.Spec.BackoffLimitPerIndex = &indexed, ptr(int32(3))
		}
	}
	if _, err := c.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Errorf("create Job: %v", err)
		return ""
	}
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "j-0-x", Namespace: ns, UID: types.UID(ns + "-pod"), Labels: labels,
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: "0"},
			Finalizers:      []string{batchv1.JobTrackingFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: uid, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec:   job.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: status},
	}
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("create pod: %v", err)
		return ""
	}
	// The fake clientset does not refuse a write on a stale
	// resourceVersion, as the API server does, so a sync on a lagging cache
	// can write status.failed back to 0 after it was 1: a count seen once
	// is a count, and an Ignore must hold for a while.
	var got string
	counted, ignoredPolls := false, 0
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		j, err := c.client.BatchV1().Jobs(ns).Get(ctx, "j", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if j.Status.Failed > 0 || (j.Status.UncountedTerminatedPods != nil && len(j.Status.UncountedTerminatedPods.Failed) > 0) {
			counted = true
		}
		if len(p.Finalizers) > 0 || (j.Status.UncountedTerminatedPods != nil && len(j.Status.UncountedTerminatedPods.Failed) > 0) {
			return false, nil
		}
		for _, cond := range j.Status.Conditions {
			if cond.Reason == batchv1.JobReasonPodFailurePolicy {
				got = string(batchv1.PodFailurePolicyActionFailJob)
				return true, nil
			}
		}
		switch {
		case j.Status.FailedIndexes != nil && *j.Status.FailedIndexes == "0":
			got = string(batchv1.PodFailurePolicyActionFailIndex)
		case counted:
			got = "counted"
		case ignoredPolls < 25:
			ignoredPolls++
			return false, nil
		default:
			got = string(batchv1.PodFailurePolicyActionIgnore)
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("%s: the Job controller did not settle the pod: %v", ns, err)
	}
	return got
}

func statuses(mainExit int32, sidecarExit *int32) []corev1.ContainerStatus {
	main := corev1.ContainerStatus{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: mainExit}}}
	side := corev1.ContainerStatus{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if sidecarExit != nil {
		side.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: *sidecarExit}}
	}
	return []corev1.ContainerStatus{main, side}
}

func TestStopChangesVerdictAgreesWithJobController(t *testing.T) {
	// Controllers of their own, each with its fake clientset: one object
	// tracker (and its lock) per controller, not one for every row.
	var cs []*controller
	for i := 0; i < 8; i++ {
		cs = append(cs, startController(t))
	}
	kinds := map[decision.StopKind][]int32{decision.StopCRR: crrExits, decision.StopSwap: swapExits}
	type row struct {
		name     string
		rules    []batchv1.PodFailurePolicyRule
		mainExit int32
	}
	var rows []row
	for name, rules := range policies() {
		for _, mainExit := range mainExits {
			rows = append(rows, row{name, rules, mainExit})
		}
	}
	// Rows run side by side (each its own namespace and Job): the
	// controller's round trips through the fake clientset and its informers
	// dominate, not the CPU.
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i, r := range rows {
		c := cs[i%len(cs)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			differs := func(c *controller, kind decision.StopKind) (bool, string) {
				before := c.verdict(t, r.rules, statuses(r.mainExit, nil))
				differs := false
				var after []string
				for _, e := range kinds[kind] {
					v := c.verdict(t, r.rules, statuses(r.mainExit, &e))
					after = append(after, fmt.Sprintf("%d:%s", e, v))
					differs = differs || v != before
				}
				return differs, fmt.Sprintf("%s with the sidecar running, after the stop %v", before, after)
			}
			for kind := range kinds {
				pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: statuses(r.mainExit, ptr(int32(0)))}}
				change, changed := decision.StopChangesVerdict(&decision.JobFacts{Name: "j", Policy: &batchv1.PodFailurePolicy{Rules: r.rules}}, pod, []string{"proxy"}, kind)
				if d, _ := differs(c, kind); d == changed {
					continue
				}
				// Once more on a controller of its own before failing: the
				// fake clientset's informers and writes race in ways the API
				// server's (resourceVersion checks on every write) do not,
				// and a row run alone is what the Job controller would do.
				t.Logf("%s, main exit %d, %s stop: run again alone", r.name, r.mainExit, kind)
				alone := startController(t)
				if d, seen := differs(alone, kind); d != changed {
					t.Errorf("%s, main exit %d, %s stop: StopChangesVerdict = %v (%s), Job controller: %s",
						r.name, r.mainExit, kind, changed, change, seen)
				}
			}
		}()
	}
	wg.Wait()
	jobs := int64(0)
	for _, c := range cs {
		jobs += c.n.Load()
	}
	t.Logf("%d policies x main exits x stop kinds agree with the Job controller of k8s.io/kubernetes v1.37.2 (%d Jobs synced)", len(rows)*len(kinds), jobs)
}

func ptr[T any](v T) *T { return &v }
