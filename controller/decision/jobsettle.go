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
	p.Problems = kp.Problems
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
