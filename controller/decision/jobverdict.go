package decision

import (
	"fmt"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// The Job's verdict on a failed pod is the first podFailurePolicy rule that
// matches it, read by the Job controller's matchPodFailurePolicy
// (k8s.io/kubernetes v1.37.2, pkg/controller/job/pod_failure_policy.go):
// rules in policy order, first match wins; an onExitCodes rule matches a
// container whose state is terminated with a non-zero exit code (0 is never
// read, a running container is never read), in containerStatuses and then in
// initContainerStatuses, and a rule without containerName reads every
// container. A stop ends a sidecar with a code of its own: 0 by the quick-exit
// swap, 143 or 137 by a ContainerRecreateRequest (SIGTERM, SIGKILL after the
// grace period), or any code a SIGTERM handler chooses. Where a rule reads that
// code and would not on the pod as it stands, the stop changes the verdict.

// JobFacts is what the controller knows of a pod's owning Job: its name and
// podFailurePolicy, read only where the verdict can depend on it (JobReadNeeded).
type JobFacts struct {
	Name   string
	Policy *batchv1.PodFailurePolicy
	// Missing: no such Job (deleted, or replaced under the name).
	Missing bool
}

// StopKind is how a stop ends a sidecar, which sets the exit codes it leaves.
type StopKind string

const (
	// StopSwap: the quick-exit image exits 0.
	StopSwap StopKind = "swap"
	// StopCRR: kruise-daemon's SIGTERM, then SIGKILL after the grace period:
	// 143 or 137, or whatever a SIGTERM handler exits with.
	StopCRR StopKind = "crr"
)

// JobVerdictChange is a podFailurePolicy rule that can read the exit code a
// stop leaves, where the pod as it stands matches another rule or none.
type JobVerdictChange struct {
	Job       string
	Rule      int // index in the policy's rules
	Action    batchv1.PodFailurePolicyAction
	Container string // the stopped sidecar the rule reads
	ExitCode  int32  // an exit of that stop the rule matches
	// Before is the action the pod as it stands gets (empty: no rule
	// matches, the failure counts against backoffLimit).
	Before batchv1.PodFailurePolicyAction
}

// String names the rule and what it would do, for the event and explain.
func (c JobVerdictChange) String() string {
	before := "no rule (the failure counts against backoffLimit)"
	if c.Before != "" {
		before = "action " + string(c.Before)
	}
	return fmt.Sprintf("Job %s's podFailurePolicy rule %d (%s) would read sidecar %q's exit code %d from the stop, where its main containers alone get %s",
		c.Job, c.Rule, c.Action, c.Container, c.ExitCode, before)
}

// stopExits lists the exit codes a stop of the kind can leave, one of each
// class the policy can tell apart: the signal codes first (the usual ones),
// then every non-zero code the policy names, then one it names nowhere.
func stopExits(kind StopKind, policy *batchv1.PodFailurePolicy) []int32 {
	if kind == StopSwap {
		return []int32{0}
	}
	seen := map[int32]bool{143: true, 137: true}
	out := []int32{143, 137}
	var named []int32
	for _, r := range policy.Rules {
		if r.OnExitCodes == nil {
			continue
		}
		for _, v := range r.OnExitCodes.Values {
			if v != 0 && !seen[v] {
				seen[v] = true
				named = append(named, v)
			}
		}
	}
	sort.Slice(named, func(i, j int) bool { return named[i] < named[j] })
	out = append(out, named...)
	for other := int32(1); ; other++ {
		if !seen[other] {
			return append(out, other)
		}
	}
}

// PolicyVerdict is the action the Job controller's matchPodFailurePolicy
// gives a failed pod with this status: "" when no rule matches. The order
// and the matching follow pod_failure_policy.go (cited above), so that the
// one rule serves the decision, the simulator and the comparison with the
// real function. index is the matching rule's, -1 for none.
func PolicyVerdict(policy *batchv1.PodFailurePolicy, status *corev1.PodStatus) (action batchv1.PodFailurePolicyAction, index int) {
	if policy == nil {
		return "", -1
	}
	for i, r := range policy.Rules {
		switch {
		case r.OnExitCodes != nil:
			if exitCodesMatch(status.ContainerStatuses, r.OnExitCodes) || exitCodesMatch(status.InitContainerStatuses, r.OnExitCodes) {
				return r.Action, i
			}
		case len(r.OnPodConditions) > 0:
			if conditionsMatch(status.Conditions, r.OnPodConditions) {
				return r.Action, i
			}
		}
	}
	return "", -1
}

func exitCodesMatch(statuses []corev1.ContainerStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) bool {
	for _, s := range statuses {
		t := s.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		if req.ContainerName != nil && *req.ContainerName != s.Name {
			continue
		}
		if exitCodeMatches(t.ExitCode, req) {
			return true
		}
	}
	return false
}

func exitCodeMatches(code int32, req *batchv1.PodFailurePolicyOnExitCodesRequirement) bool {
	in := false
	for _, v := range req.Values {
		if v == code {
			in = true
			break
		}
	}
	switch req.Operator {
	case batchv1.PodFailurePolicyOnExitCodesOpIn:
		return in
	case batchv1.PodFailurePolicyOnExitCodesOpNotIn:
		return !in
	}
	return false
}

func conditionsMatch(conds []corev1.PodCondition, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) bool {
	for _, c := range conds {
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return true
			}
		}
	}
	return false
}

// Effect is what the Job controller does with a failed pod given the
// action of the rule it matched: Count and no rule at all both count the
// failure against backoffLimit and differ only in the controller's metric
// (matchPodFailurePolicy returns nil, true for both), so they are one effect.
func Effect(action batchv1.PodFailurePolicyAction) batchv1.PodFailurePolicyAction {
	if action == batchv1.PodFailurePolicyActionCount {
		return ""
	}
	return action
}

// StopChangesVerdict reports whether stopping the named sidecars of the pod
// by a stop of the given kind can change the Job's verdict on the pod: some
// exit the stop can leave on one of them makes the first matching rule
// another than on the pod as it stands (the sidecars still running). One
// sidecar at a time is enough: matching only grows with more terminated
// containers, so a change with several stopped shows with one of them alone.
// Pod conditions are taken as they stand: a stop adds none the policy can
// name (DisruptionTarget comes from eviction and preemption, not from a
// container's stop).
func StopChangesVerdict(job *JobFacts, pod *corev1.Pod, stopped []string, kind StopKind) (JobVerdictChange, bool) {
	if job == nil || job.Policy == nil || len(job.Policy.Rules) == 0 {
		return JobVerdictChange{}, false
	}
	base := standing(pod, stopped)
	before, _ := PolicyVerdict(job.Policy, base)
	for _, code := range stopExits(kind, job.Policy) {
		for _, name := range stopped {
			after, rule := PolicyVerdict(job.Policy, withExit(base, name, code))
			if Effect(after) != Effect(before) {
				return JobVerdictChange{Job: job.Name, Rule: rule, Action: after, Container: name, ExitCode: code, Before: before}, true
			}
		}
	}
	return JobVerdictChange{}, false
}

// standing is the pod's status with the sidecars to be stopped running: as
// the Job controller sees the pod when its phase is settled before the stop.
func standing(pod *corev1.Pod, stopped []string) *corev1.PodStatus {
	st := pod.Status.DeepCopy()
	for i := range st.ContainerStatuses {
		if contains(stopped, st.ContainerStatuses[i].Name) {
			st.ContainerStatuses[i].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
	}
	return st
}

func withExit(st *corev1.PodStatus, container string, code int32) *corev1.PodStatus {
	out := st.DeepCopy()
	for i := range out.ContainerStatuses {
		if out.ContainerStatuses[i].Name == container {
			out.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
		}
	}
	return out
}

// JobReadNeeded reports whether the pod's owning Job must be read before a
// stop: a Job owns it, a main failed (so the pod will be Failed whatever the
// sidecar does, and the policy reads it), and the stop is by CRR, whose exit
// is non-zero. A swap's exit 0 is never read, and a pod whose mains all
// succeeded fails only by the sidecar's exit, which the Warning of
// SidecarFailedPod covers.
func JobReadNeeded(pod *corev1.Pod, mainsFailed bool, kind StopKind) (job string, ok bool) {
	if kind != StopCRR || !mainsFailed {
		return "", false
	}
	return OwningJob(pod)
}

// OwningJob is the name of the Job that controls the pod, if any.
func OwningJob(pod *corev1.Pod) (string, bool) {
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "Job" && o.APIVersion == "batch/v1" {
			return o.Name, true
		}
	}
	return "", false
}
