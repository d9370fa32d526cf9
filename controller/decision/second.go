package decision

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// OpenKruise's own SidecarTerminator reads the same env marks as this
// controller. Run together, both would stop the same sidecars. What it
// leaves on a pod (github.com/openkruise/kruise v1.9.1,
// pkg/controller/sidecarterminator/):
//   - kill_container_action.go: one ContainerRecreateRequest named
//     "sidecar-termination-<pod UID>", owned by the pod, without labels or a
//     deadline, naming the normal sidecars not yet terminated; and a Normal
//     event, reason "SidecarTerminator", from "sidecarterminator-controller".
//   - inplace_update_action.go: on a virtual-kubelet node, an update of the
//     sidecars' images to their env image, with the same event.
//   - sidecar_terminator_controller.go, markJobPodTerminated: for
//     ignore-exit-code sidecars, the pod's phase and the condition
//     SidecarTerminated=True with the message "Terminated by Sidecar
//     Terminator".
//
// The controller lists only its own CRRs, so it looks for kruise's CRR (one
// read) only on a signal it already has for free: a CRR of its own that
// kruise-daemon keeps Pending while no other of its own is worked on (the
// daemon works on one CRR of a pod at a time, so it works on someone
// else's), or kruise's settle condition on the pod. Once it has seen
// kruise's terminator act, it looks before each first CRR of a pod.
//
// The rule when both act: sidecar-terminator yields. It creates no CRR for
// a container kruise's CRR names, for as long as its own CRR for it would
// have had (CRRDeadline), and follows through only on a container still
// running after that; it leaves a pod whose phase kruise settled to kruise
// and the kubelet. A Warning (SecondTerminator) says so on the pod.
const (
	KruiseTerminatorCRRPrefix = "sidecar-termination-"
	KruiseSettleMessage       = "Terminated by Sidecar Terminator"
	ReasonSecondTerminator    = "SecondTerminator"
	// SecondTerminatorGrace is how long, once kruise's terminator has been
	// seen in the cluster, the first CRR of a pod waits after its mains are
	// done for kruise's own CRR to show, so that the two do not race.
	SecondTerminatorGrace = 5 * time.Second
)

// KruiseTerminatorCRRName is the name OpenKruise's SidecarTerminator gives
// its CRR for the pod (getCRRName in kill_container_action.go).
func KruiseTerminatorCRRName(pod *corev1.Pod) string {
	return KruiseTerminatorCRRPrefix + string(pod.UID)
}

// SecondTerminator is OpenKruise's SidecarTerminator's CRR for the pod.
type SecondTerminator struct {
	CRR        string
	Containers []string
	Phase      string
	Created    time.Time
}

// SettledByKruise reports whether OpenKruise's SidecarTerminator settled the
// pod's phase: its SidecarTerminated condition carries its message (ours
// another).
func SettledByKruise(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == ConditionSidecarTerminated && c.Status == corev1.ConditionTrue && c.Message == KruiseSettleMessage {
			return true
		}
	}
	return false
}

// SuspectSecondTerminator reports the free signal that another CRR of the
// pod is being worked on: kruise-daemon set one of our CRRs Pending
// (pickRecreateRequest in pkg/daemon/containerrecreate/
// crr_daemon_controller.go does so to every CRR of the pod but the one it
// works on), and none of ours is Recreating.
func SuspectSecondTerminator(in Input) bool {
	pending := false
	for _, c := range in.CRRs {
		switch c.Phase {
		case crrPhaseRecreating:
			return false
		case crrPhasePending:
			pending = true
		}
	}
	return pending
}

// yieldToSecondTerminator returns the sidecars kruise's CRR is stopping,
// which the plan leaves to it, and until when; it adds the Warning.
func (p *Plan) yieldToSecondTerminator(in Input) (map[string]bool, time.Time) {
	st := in.SecondTerminator
	if st == nil {
		return nil, time.Time{}
	}
	until := st.Created.Add(CRRDeadline(in.Pod, in.Policy))
	p.Problems = append(p.Problems, secondTerminatorProblem(st, until))
	if !in.Now.Before(until) {
		return nil, until
	}
	yield := map[string]bool{}
	for _, c := range st.Containers {
		yield[c] = true
	}
	return yield, until
}

func secondTerminatorProblem(st *SecondTerminator, until time.Time) Problem {
	return Problem{Reason: ReasonSecondTerminator, Message: fmt.Sprintf(
		"OpenKruise's own SidecarTerminator also acts on this pod: its ContainerRecreateRequest %s names %v; sidecar-terminator makes no further one for them until %s, then follows through on any still running. Run one terminator: turn off OpenKruise's SidecarTerminator feature gate",
		st.CRR, st.Containers, until.UTC().Format(time.RFC3339))}
}

// WithSecondTerminator adds the SecondTerminator Warning to a plan that
// did not need kruise's CRR to decide (its sidecars had stopped, the pod
// had finished) but where it was found: it is said all the same.
func WithSecondTerminator(p Plan, in Input) Plan {
	st := in.SecondTerminator
	if st == nil || in.Pod == nil {
		return p
	}
	for _, pr := range p.Problems {
		if pr.Reason == ReasonSecondTerminator {
			return p
		}
	}
	p.Problems = append(append([]Problem(nil), p.Problems...), secondTerminatorProblem(st, st.Created.Add(CRRDeadline(in.Pod, in.Policy))))
	return p
}

// settledByKruise is the plan for a pod whose phase kruise's terminator
// settled: it and the kubelet (which stops the containers of a pod whose
// phase is terminal) stop the ignore-exit-code sidecars; a kill of ours
// would be a second one.
func (p Plan) settledByKruise(ignoring []Container) Plan {
	p.Problems = append(p.Problems, Problem{Reason: ReasonSecondTerminator, Message: fmt.Sprintf(
		"OpenKruise's own SidecarTerminator settled this pod's phase (condition %s: %q); sidecar-terminator leaves sidecars %v to it and the kubelet. Run one terminator: turn off OpenKruise's SidecarTerminator feature gate",
		ConditionSidecarTerminated, KruiseSettleMessage, names(ignoring))})
	return p.with(VerdictInProgress, fmt.Sprintf("OpenKruise's SidecarTerminator settled the phase; it and the kubelet stop %v", names(ignoring)))
}

// waitForSecondTerminator reports whether a first CRR for env-marked
// sidecars waits, in a cluster where kruise's terminator was seen, for its
// CRR to show.
func waitForSecondTerminator(in Input, mainsDone time.Time, latest *CRR, cs []Container) (time.Duration, bool) {
	if !in.KruiseTerminatorSeen || in.SecondTerminator != nil || latest != nil {
		return 0, false
	}
	kruiseMarked := false
	for _, c := range cs {
		kruiseMarked = kruiseMarked || markedByKruiseEnv(c)
	}
	wait := mainsDone.Add(SecondTerminatorGrace).Sub(in.Now)
	return wait, kruiseMarked && wait > 0
}

// markedByKruiseEnv: kruise's terminator acts on env marks only, never on
// this controller's annotation.
func markedByKruiseEnv(c Container) bool {
	for _, m := range c.MarkedBy {
		if m == EnvTerminate {
			return true
		}
	}
	return false
}
