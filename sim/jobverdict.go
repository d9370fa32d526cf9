package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The Job's verdict on a failed pod. The simulator plays no Job controller
// of its own: the verdict is decision.PolicyVerdict, the one copy of the Job
// controller's rule matching (matchPodFailurePolicy in k8s.io/kubernetes
// v1.37.2, pkg/controller/job/pod_failure_policy.go; hack/jobverdict holds it
// to the real controller). The Job controller counts a failed pod once, on
// the first status it sees with phase Failed (trackJobStatusAndRemoveFinalizers
// in job_controller.go, while the pod carries batch.kubernetes.io/job-tracking):
// the checker holds the verdict on that first terminal status to the verdict
// on the pod's main containers alone.

// ownByJob makes a pod of a template with a podFailurePolicy owned by a Job
// of its own, which the world serves to the controller's Job reads.
func (s *Sim) ownByJob(pod *corev1.Pod, t *Template) {
	if t.JobPolicy == nil {
		return
	}
	name := "job-" + pod.Name
	yes := true
	pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name,
		UID: types.UID("job-" + string(pod.UID)), Controller: &yes, BlockOwnerDeletion: &yes})
	if s.world.jobs == nil {
		s.world.jobs = map[cache.ObjectName]*batchv1.PodFailurePolicy{}
	}
	s.world.jobs[cache.ObjectName{Namespace: pod.Namespace, Name: name}] = t.JobPolicy
}

// LiveJob serves the controller's live Job reads (reconciler.JobReader)
// from the world; the report counts them apart from the other live reads,
// so a run shows the reads the Job's verdict costs.
func (w *apiWriter) LiveJob(_ context.Context, namespace, name string) (*batchv1.Job, error) {
	w.s.stats.jobReads++
	policy, ok := w.s.world.jobs[cache.ObjectName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(batchv1.Resource("jobs"), name)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: batchv1.JobSpec{PodFailurePolicy: policy}}
	for _, e := range w.s.world.pods {
		for _, o := range e.obj.OwnerReferences {
			if o.Kind == "Job" && o.Name == name && e.obj.Namespace == namespace {
				job.UID = o.UID
			}
		}
	}
	return job, nil
}

var _ reconciler.JobReader = (*apiWriter)(nil)

// jobVerdict runs when the pod first turns terminal. A pod whose mains all
// exited 0 fails only by a sidecar's exit: that is OpenKruise's semantics,
// kept, and the Warning SidecarFailedPod says so; the checker judges the
// pods a main failed.
func (ch *Checker) jobVerdict(e *podEntry) {
	policy := e.tmpl.JobPolicy
	if policy == nil || e.obj.Status.Phase != corev1.PodFailed || !mainFailed(e) {
		return
	}
	first, rule := decision.PolicyVerdict(policy, &e.obj.Status)
	alone, _ := decision.PolicyVerdict(policy, mainsAlone(e))
	if decision.Effect(first) != decision.Effect(alone) {
		ch.violate("safety", e, "the Job's verdict on the pod's first terminal status is %q (rule %d), on its main containers alone %q: a stopped sidecar's exit code changed it (%s)",
			first, rule, alone, sidecarExits(e))
	}
}

// failJobLater runs on every status of a Failed pod. The Job controller
// matches the policy against every Failed pod of a Job at every sync until
// the Job finishes, counted or not (getFailJobMessage in job_controller.go),
// so a FailJob rule that reads a sidecar's exit written after the count still
// fails the Job. The swap's exit 0 is never read; the settle cannot prevent
// that (docs/job-verdict.md, "The settle, and its limit"), and where the
// controller settles for want of a swap it must have said so: a pod whose
// later status a FailJob rule reads, where its mains alone would not, without
// a JobPolicyReadsSidecarExit Warning, is a violation.
func (ch *Checker) failJobLater(e *podEntry) {
	policy := e.tmpl.JobPolicy
	if policy == nil || !mainFailed(e) || e.truth.jobWarned {
		return
	}
	now, rule := decision.PolicyVerdict(policy, &e.obj.Status)
	alone, _ := decision.PolicyVerdict(policy, mainsAlone(e))
	if now == batchv1.PodFailurePolicyActionFailJob && alone != batchv1.PodFailurePolicyActionFailJob {
		ch.violate("safety", e, "a later sync of the Job would fail it by its podFailurePolicy rule %d (FailJob) on the pod's status, where its main containers alone get %q, and no %s Warning said so (%s)",
			rule, alone, decision.ReasonJobPolicyReadsSidecarExit, sidecarExits(e))
	}
}

func mainFailed(e *podEntry) bool {
	for _, cs := range e.obj.Status.ContainerStatuses {
		if !e.truth.sidecars[cs.Name] && cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 {
			return true
		}
	}
	return false
}

// mainsAlone is the pod's status with every sidecar running: what the main
// containers alone say.
func mainsAlone(e *podEntry) *corev1.PodStatus {
	st := e.obj.Status.DeepCopy()
	for i := range st.ContainerStatuses {
		if e.truth.sidecars[st.ContainerStatuses[i].Name] {
			st.ContainerStatuses[i].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
	}
	return st
}

func sidecarExits(e *podEntry) string {
	out := ""
	for _, cs := range e.obj.Status.ContainerStatuses {
		if e.truth.sidecars[cs.Name] && cs.State.Terminated != nil {
			out += fmt.Sprintf("%s exited %d; ", cs.Name, cs.State.Terminated.ExitCode)
		}
	}
	return out
}

// jobPolicies are the podFailurePolicy shapes the soak draws: every action,
// on every container, on the main, on the sidecar, and first-match pairs.
func jobPolicies() []*batchv1.PodFailurePolicy {
	rule := func(a batchv1.PodFailurePolicyAction, container string, op batchv1.PodFailurePolicyOnExitCodesOperator, v ...int32) batchv1.PodFailurePolicyRule {
		req := &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: v}
		if container != "" {
			req.ContainerName = &container
		}
		return batchv1.PodFailurePolicyRule{Action: a, OnExitCodes: req}
	}
	in, notIn := batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn
	fail, index, ignore, count := batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionFailIndex,
		batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount
	policy := func(rs ...batchv1.PodFailurePolicyRule) *batchv1.PodFailurePolicy {
		return &batchv1.PodFailurePolicy{Rules: rs}
	}
	return []*batchv1.PodFailurePolicy{
		policy(rule(fail, "", notIn, 0, 1)),
		policy(rule(fail, "main", notIn, 0, 1)),
		policy(rule(fail, "proxy", notIn, 0)),
		policy(rule(ignore, "", in, 137, 143)),
		policy(rule(ignore, "main", in, 137, 143)),
		policy(rule(index, "", in, 42, 137)),
		policy(rule(count, "", in, 143), rule(ignore, "main", notIn, 0)),
		policy(rule(ignore, "main", in, 3), rule(fail, "", notIn, 0)),
		policy(rule(fail, "", in, 0)),
	}
}

// jobPolicyTemplates draws pods of Jobs with policies for the soak: a main
// that fails (or not) with a code the policies name, a sidecar stopped by a
// CRR or by the swap that handles SIGTERM, exits 1 on it or ignores it.
func jobPolicyTemplates(r *rand.Rand) []Template {
	policies := jobPolicies()
	codes := []int32{0, 1, 3, 42}
	onTerm := []string{"exit:0", "exit:1", "ignore"}
	var out []Template
	for i := 0; i < 4; i++ {
		marks := []corev1.EnvVar{markCRR}
		term := onTerm[r.IntN(len(onTerm))]
		switch r.IntN(3) {
		case 1:
			// Both marks: a CRR, or the swap where the policy could read
			// the CRR's exit (decision/jobsettle.go).
			marks = append(marks, markImage)
		case 2:
			marks = []corev1.EnvVar{markImage}
		}
		t := never(fmt.Sprintf("jv%d", i), mainC("main", 2*time.Second, 20*time.Second, codes[r.IntN(len(codes))]),
			sidecar("proxy", term, marks...))
		t.JobPolicy = policies[r.IntN(len(policies))]
		t.Grace = int64(1 + r.IntN(10))
		t.Expect = ExpectEither
		out = append(out, t)
	}
	return out
}

// Scenarios of the Job's verdict: a main that fails with a code the policy
// retries, and a sidecar stopped by a CRR that would exit 143 or 137.
func init() { Scenarios = append(Scenarios, jobVerdictScenarios...) }

func withJobPolicy(t Template, p *batchv1.PodFailurePolicy) Template { t.JobPolicy = p; return t }

var jobVerdictScenarios = func() []Scenario {
	p := jobPolicies()
	failJobAny, failJobMain, ignoreSignals := p[0], p[1], p[3]
	return []Scenario{
		{Name: "job-verdict-failjob", Purpose: "podFailurePolicy FailJob NotIn [0 1] on every container, main exits 1, CRR-stopped sidecar exits 143 or 137: the phase is settled first, so the Job retries",
			Nodes: normalNodes, Templates: []Template{
				withJobPolicy(never("fj-143", mainC("main", 2*time.Second, 10*time.Second, 1), sidecar("proxy", "exit:143", markCRR)), failJobAny),
				withJobPolicy(never("fj-137", mainC("main", 2*time.Second, 10*time.Second, 1), sidecar("proxy", "ignore", markCRR)), failJobAny),
				withJobPolicy(never("fj-ok", mainC("main", 2*time.Second, 10*time.Second, 0), sidecar("proxy", "exit:0", markCRR)), failJobAny)}},
		{Name: "job-verdict-ignore", Purpose: "podFailurePolicy Ignore In [137 143], main exits 3, CRR-stopped sidecar exits 137: the phase is settled first, so the failure counts",
			Nodes: normalNodes, Templates: []Template{
				withJobPolicy(never("ig-137", mainC("main", 2*time.Second, 10*time.Second, 3), sidecar("proxy", "ignore", markCRR)), ignoreSignals)}},
		{Name: "job-verdict-swap", Purpose: "podFailurePolicy FailJob NotIn [0 1] or Ignore In [137 143] on every container, main exits 1 or 3, a sidecar with both the CRR mark and a quick-exit image that ignores SIGTERM: the swap stops it (exit 0), not the CRR, and nothing is settled",
			Nodes: normalNodes, Templates: []Template{
				withJobPolicy(never("sw-fj", mainC("main", 2*time.Second, 10*time.Second, 1), sidecar("proxy", "ignore", markCRR, markImage)), failJobAny),
				withJobPolicy(never("sw-ig", mainC("main", 2*time.Second, 10*time.Second, 3), sidecar("proxy", "ignore", markCRR, markImage)), ignoreSignals)}},
		{Name: "job-verdict-main-rule", Purpose: "podFailurePolicy on containerName main, or a swap's exit 0: nothing the stop leaves is read, no settle",
			Nodes: normalNodes, Templates: []Template{
				withJobPolicy(never("main-rule", mainC("main", 2*time.Second, 10*time.Second, 1), sidecar("proxy", "exit:143", markCRR)), failJobMain),
				withJobPolicy(never("swap", mainC("main", 2*time.Second, 10*time.Second, 1), sidecar("proxy", "exit:1", markImage)), failJobAny)}},
	}
}()
