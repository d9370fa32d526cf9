package decision

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// keepJobVerdict is the Job's verdict kept on a pod whose stop is planned
// (kp): where a main failed and the plan stops sidecars by a CRR, whose exit
// a podFailurePolicy rule of the owning Job could read, the pod's phase is
// settled to Failed from the mains first, instead of the CRR. The Job
// controller then counts the pod on a status where the sidecars still run,
// and the kubelet stops the containers of the terminal pod (docs/job-verdict.md
// says what that ordering holds against). The Job is read only here: the
// plan names it (NeedsJob) when the input has not got it, and the reconciler
// reads it live and decides again; a swap, a pod no Job owns and a pod whose
// mains all succeeded never get that far.
func (p Plan) keepJobVerdict(in Input, mains []Container, kp Plan) Plan {
	stopped := crrTargets(kp.Actions)
	if len(stopped) == 0 || settledPhase(mains) != corev1.PodFailed {
		return kp
	}
	job, owned := JobReadNeeded(in.Pod, true, StopCRR)
	if !owned {
		return kp
	}
	if in.Job == nil {
		kp.NeedsJob = job
		return kp
	}
	change, ok := StopChangesVerdict(in.Job, in.Pod, stopped, StopCRR)
	if !ok {
		return kp
	}
	var left []Container
	for _, c := range p.Containers {
		if c.Role == RoleSidecar && c.State != StateTerminated {
			left = append(left, c)
		}
	}
	p.JobVerdict = &change
	p.FailedKills = kp.FailedKills
	p.Problems = append(kp.Problems, jobReadsStopWarning(in, p.Containers, change))
	if refused, wait := p.settleRefused(in, left); wait {
		if refused.Verdict == VerdictNoPath {
			// Given up on the settle: the stop goes ahead as planned, and
			// the Warning says the settle was refused.
			kp.Problems, kp.JobVerdict = refused.Problems, &change
			return kp
		}
		return refused
	}
	p.Actions = []Action{{Kind: ActionSettlePhase, Containers: names(left), Phase: corev1.PodFailed, JobRule: change.String()}}
	return p.with(VerdictAct, fmt.Sprintf("the main containers are done and one failed; %s, so the phase is settled first: %s", change, describeActions(p.Actions)))
}

// jobReadsCRR is the Job's podFailurePolicy rule that could read the exit
// code a CRR leaves on sidecar c, on a pod whose main failed and whose phase
// is not settled yet (on a settled pod the kubelet stops the containers
// whatever way is chosen). The Job must have been read (Input.Job).
func jobReadsCRR(in Input, containers []Container, c Container) (JobVerdictChange, bool) {
	if in.Job == nil || in.Pod.Status.Phase == corev1.PodFailed || in.Pod.Status.Phase == corev1.PodSucceeded {
		return JobVerdictChange{}, false
	}
	failed := false
	for _, m := range containers {
		failed = failed || (m.Role == RoleMain && m.State == StateTerminated && m.ExitCode != 0)
	}
	if !failed {
		return JobVerdictChange{}, false
	}
	return StopChangesVerdict(in.Job, in.Pod, []string{c.Name}, StopCRR)
}

// jobSwap is the quick-exit image that stops sidecar c in place of a CRR
// whose exit a Job's rule could read, or why there is none. The swap's exit
// is 0, and matchOnExitCodes (pod_failure_policy.go, getMatchingContainerFromList)
// reads only State.Terminated with a non-zero exit code. The kubelet restarts a
// running container whose image changed whatever the restart policy
// (kuberuntime_manager.go computePodActions: "Restart regardless of the restart
// policy because the container spec changed"), and starts it in the same pod
// sync as it kills the old instance, so a Never pod whose main failed shows the
// quick-exit image's 0, never the old instance's exit, when it turns Failed.
// The other containers stay as they are: a terminated main of a Never pod is
// not restarted (ShouldContainerBeRestarted).
func jobSwap(in Input, c Container) (image, whyNot string) {
	if !in.Node.Capabilities().ImageUpdate {
		return "", fmt.Sprintf("node %q (%s) ignores a change of a container's image", in.Node.Name, in.Node.platform())
	}
	image = c.QuickExitImage
	if image == "" {
		image = c.DefaultImage
	}
	if image == "" {
		return "", fmt.Sprintf("%q has no quick-exit image that the operator's allowlist allows", c.Name)
	}
	if r := latestRefusal(in.Refusals, ActionSwapImage, c.Name); r != nil {
		return "", fmt.Sprintf("the image swap of %q was refused (%s)", c.Name, r.Describe())
	}
	return image, ""
}

// jobReadsStopWarning says, where the phase is settled because the swap is
// not possible, which rule will read the sidecar's exit and the fixes: the
// settle keeps the Job's first count right, but a FailJob rule is matched
// again at every sync of the Job, on every failed pod (job_controller.go,
// getFailJobMessage), once the kubelet has written the sidecar's exit.
func jobReadsStopWarning(in Input, containers []Container, change JobVerdictChange) Problem {
	why := fmt.Sprintf("%q is not stopped by a ContainerRecreateRequest", change.Container)
	for _, c := range containers {
		if c.Name == change.Container {
			_, why = jobSwap(in, c)
		}
	}
	return Problem{Reason: ReasonJobPolicyReadsSidecarExit, Message: fmt.Sprintf(
		"%s; the quick-exit image swap, whose exit 0 no rule reads, cannot stop it (%s), so the phase is settled from the main containers first, and the rule may still read the sidecar's exit once the kubelet has stopped it: name the main container in the rule (containerName), or give %q a quick-exit image (%s, or the pod annotation %s) that the allowlist allows",
		change, why, change.Container, EnvTerminateWithImage, AnnotationQuickExitImage)}
}

func crrTargets(actions []Action) []string {
	var out []string
	for _, a := range actions {
		if a.Kind == ActionCreateCRR {
			out = append(out, a.Containers...)
		}
	}
	return out
}

// sidecarFailedPod warns about a pod that failed only by a stop's exit:
// every main exited 0, and a sidecar that is not marked ignore-exit-code
// ended non-zero under a CRR of this controller (kruise-daemon's SIGTERM,
// or SIGKILL after the grace period). That is OpenKruise's semantics and
// stays the default, but the Job reruns work that succeeded, so it is
// never silent.
func (p Plan) sidecarFailedPod(in Input) Plan {
	pod := in.Pod
	if pod.Status.Phase != corev1.PodFailed || HasSidecarTerminatedCondition(pod) || pod.DeletionTimestamp != nil {
		return p
	}
	containers, _ := Classify(pod, in.Policy)
	var failed []Container
	for _, c := range containers {
		switch {
		case c.Role == RoleMain && (c.State != StateTerminated || c.ExitCode != 0):
			return p
		case c.Role == RoleSidecar && !c.IgnoreExitCode && c.State == StateTerminated && c.ExitCode != 0 && everTargeted(in.CRRs, c.Name):
			failed = append(failed, c)
		}
	}
	for _, c := range failed {
		p.Problems = append(p.Problems, Problem{Reason: ReasonSidecarFailedPod, Message: fmt.Sprintf(
			"every main container succeeded, but sidecar %q exited %d when it was stopped, so the pod failed and its Job may run the work again: make %q exit 0 on SIGTERM, or set %s=true on it so the phase is settled from the main containers before it is stopped",
			c.Name, c.ExitCode, c.Name, EnvIgnoreExitCode)})
	}
	return p
}
