package decision

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Decide returns the plan for one pod. It never reads a clock or the network:
// the same input always gives the same plan. Where the plan rests on objects
// the input may not show, Plan.Confirm names them (confirm.go).
func Decide(in Input) Plan {
	p := decide(in)
	p.Confirm = confirmations(in, p)
	return p
}

func decide(in Input) Plan {
	pod := in.Pod
	settled, why, ok := eligible(pod)
	if !ok {
		return Plan{Verdict: VerdictIgnored, Reason: why, NodePath: nodePath(in)}.sidecarFailedPod(in)
	}
	containers, problems := Classify(pod, in.Policy)
	caps := in.Node.Capabilities()
	containers = leaveToPlatform(containers, caps)
	plan := Plan{Containers: containers, Problems: problems, NodePath: nodePath(in)}

	var mains, sidecars []Container
	for _, c := range containers {
		switch c.Role {
		case RoleMain:
			mains = append(mains, c)
		case RoleSidecar:
			sidecars = append(sidecars, c)
		}
	}
	if len(sidecars) == 0 {
		return plan.with(VerdictNoSidecars, "no regular container is marked as a sidecar")
	}
	if len(mains) == 0 {
		plan.Problems = append(plan.Problems, Problem{Reason: ReasonNoMainContainer,
			Message: "every regular container is marked as a sidecar; with no main container to wait for, none is stopped"})
		return plan.with(VerdictNoMain, "the pod has no main container")
	}
	if !settled && RestartingAllContainers(pod) {
		return plan.with(VerdictMainsActive, "the kubelet is restarting every container of the pod in place (a RestartAllContainers rule matched)")
	}
	doneAt, waitingFor := mainsDone(mains)
	if waitingFor != "" {
		return plan.with(VerdictMainsActive, waitingFor)
	}
	plan.MainsDoneAt = doneAt

	var regular, ignoring, restarting, platformOwn []Container
	for _, s := range sidecars {
		switch {
		case s.State == StateTerminated:
		case s.carriesMark(caps):
			platformOwn = append(platformOwn, s)
		case s.IgnoreExitCode, settled:
			// On a settled pod every sidecar is the kubelet's to stop
			// first: a Job's verdict settled it with them running
			// (jobsettle.go).
			ignoring = append(ignoring, s)
		case s.KillBlocked:
			restarting = append(restarting, s)
		default:
			regular = append(regular, s)
		}
	}
	if in.Node.Found && !caps.stopsOne() {
		return plan.settleWithoutStop(in, mains, append(append(regular, ignoring...), restarting...), settled)
	}
	for _, s := range restarting {
		plan.Problems = append(plan.Problems, Problem{Reason: killBlockedReason(s), Message: killBlockedMessage(s)})
	}
	switch {
	case len(restarting) > 0 && len(regular) == 0:
		return plan.with(VerdictNoPath, fmt.Sprintf("the main containers are done, but no stop of sidecars %v is safe: each would run again, or restart the whole pod", names(restarting)))
	case len(regular) > 0:
		// Ignore-exit-code sidecars wait until the others have terminated:
		// the phase is settled only then.
		return plan.keepJobVerdict(in, mains, plan.killInOrder(in, sidecars, regular))
	case len(ignoring) > 0 && SettledByKruise(pod):
		return plan.settledByKruise(ignoring)
	case len(ignoring) > 0 && !settled:
		if refused, wait := plan.settleRefused(in, ignoring); wait {
			return refused
		}
		// Settle the phase and nothing else: the kubelet stops the containers
		// of a pod whose phase is terminal, and keeps the phase. Stopping them
		// ourselves in the same breath races the kubelet's own pending status
		// write, which may still carry phase Running: a sidecar killed then
		// fails the pod (seen on the real node).
		plan.Actions = append(plan.Actions, Action{Kind: ActionSettlePhase,
			Containers: names(ignoring), Phase: settledPhase(mains)})
		return plan.with(VerdictAct, "the main containers are done: "+describeActions(plan.Actions))
	case len(ignoring) > 0:
		// Settled: the kubelet should stop them within the pod's grace
		// period. Past it, stop them ourselves.
		if wait := settledGraceEnd(pod).Sub(in.Now); wait > 0 {
			plan.RequeueAfter = wait
			return plan.with(VerdictInProgress, fmt.Sprintf("the phase is settled; waiting %s for the kubelet to stop ignore-exit-code sidecars %v", wait.Round(time.Second), names(ignoring)))
		}
		// Never a sidecar no stop may touch: the phase is terminal, and the
		// kubelet's own stop of a terminal pod's containers restarts nothing.
		var killable []Container
		for _, s := range ignoring {
			if !s.KillBlocked {
				killable = append(killable, s)
			}
		}
		if len(killable) == 0 {
			return plan.with(VerdictInProgress, fmt.Sprintf("the phase is settled; sidecars %v are left to the kubelet: no stop of ours is safe for them", names(ignoring)))
		}
		return plan.kill(in, killable)
	}
	if len(platformOwn) > 0 {
		return plan.leftToPlatform(in, platformOwn)
	}
	return plan.with(VerdictDone, "the main containers are done and every sidecar has terminated")
}

// eligible applies the filter of the pods the controller looks at. settled is
// true for a pod whose phase this controller already settled (ignore exit code):
// it is looked at until its ignore-exit-code sidecars have stopped.
func eligible(pod *corev1.Pod) (settled bool, why string, ok bool) {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		return false, fmt.Sprintf("restartPolicy is %q: not a Job-type pod", pod.Spec.RestartPolicy), false
	}
	if pod.DeletionTimestamp != nil {
		return false, "the pod is being deleted", false
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		if !HasSidecarTerminatedCondition(pod) {
			return false, fmt.Sprintf("the pod has finished (%s)", pod.Status.Phase), false
		}
		settled = true
	case corev1.PodPending, "":
		// A sidecar that never started keeps the phase Pending after the main
		// containers ran; an uninitialized pod has no running main yet.
		if !initialized(pod) {
			return false, "the pod is pending: its init containers have not all completed", false
		}
	}
	reported := statusByName(pod.Status.ContainerStatuses)
	for _, c := range pod.Spec.Containers {
		if reported[c.Name] == nil {
			return false, fmt.Sprintf("container %q has no status yet", c.Name), false
		}
	}
	return settled, "", true
}

func initialized(pod *corev1.Pod) bool {
	statuses := statusByName(pod.Status.InitContainerStatuses)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			continue
		}
		s := statuses[c.Name]
		if s == nil || s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			return false
		}
	}
	return true
}

// mainsDone reports when the last main container finished, or, when one is
// not done, why. A main is done when it has terminated and the kubelet's
// restart rules (restart.go) will not run it again.
func mainsDone(mains []Container) (time.Time, string) {
	var last time.Time
	for _, m := range mains {
		if m.State != StateTerminated {
			return time.Time{}, fmt.Sprintf("main container %q is %s", m.Name, m.State)
		}
		if m.AfterExit.Again {
			return time.Time{}, fmt.Sprintf("main container %q exited with code %d and %s restarts it", m.Name, m.ExitCode, m.AfterExit.Rule)
		}
		if m.FinishedAt.After(last) {
			last = m.FinishedAt
		}
	}
	return last, ""
}

func settledPhase(mains []Container) corev1.PodPhase {
	for _, m := range mains {
		if m.ExitCode != 0 {
			return corev1.PodFailed
		}
	}
	return corev1.PodSucceeded
}

// settledGrace is added to the pod's termination grace period before the
// controller stops, itself, sidecars the kubelet should have stopped.
const settledGrace = 10 * time.Second

// settledGraceEnd is when the kubelet should have stopped the containers of
// a pod whose phase this controller settled.
func settledGraceEnd(pod *corev1.Pod) time.Time {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == ConditionSidecarTerminated {
			return c.LastTransitionTime.Add(time.Duration(grace)*time.Second + settledGrace)
		}
	}
	return time.Time{}
}

// HasSidecarTerminatedCondition reports whether this controller settled the pod's phase.
func HasSidecarTerminatedCondition(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == ConditionSidecarTerminated && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// CRRName is the deterministic name of the attempt-th ContainerRecreateRequest
// for a pod: a restarted controller, or one whose cache lags, computes the same
// name and so cannot create a second CRR for the same attempt.
func CRRName(pod *corev1.Pod, attempt int) string {
	uid := strings.ReplaceAll(string(pod.UID), "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	base := pod.Name
	if len(base) > 200 {
		base = strings.TrimRight(base[:200], "-.")
	}
	return fmt.Sprintf("%s-%s-st%d", base, uid, attempt)
}

// StageCRRName is CRRName for a stage of a stop order: stage 0 (the sidecars
// the order does not name, or every sidecar without an order) keeps CRRName,
// so pods without an order are named as before; later stages carry their
// number, so each stage counts its own attempts under names of its own.
func StageCRRName(pod *corev1.Pod, stage, attempt int) string {
	if stage == 0 {
		return CRRName(pod, attempt)
	}
	return fmt.Sprintf("%s-s%d", CRRName(pod, attempt), stage)
}

func (p Plan) with(v Verdict, reason string) Plan {
	p.Verdict, p.Reason = v, reason
	return p
}

func names(cs []Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}
