package decision

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Verdict sums up a plan in one word, for logs and metrics.
type Verdict string

const (
	VerdictIgnored     Verdict = "Ignored"     // not a pod this controller looks at
	VerdictNoSidecars  Verdict = "NoSidecars"  // nothing is marked as a sidecar
	VerdictNoMain      Verdict = "NoMain"      // every container is a sidecar: never act
	VerdictMainsActive Verdict = "MainsActive" // a main container runs or can still restart
	VerdictDone        Verdict = "Done"        // every sidecar has terminated
	VerdictInProgress  Verdict = "InProgress"  // a kill was issued; waiting for it to take effect
	VerdictAct         Verdict = "Act"         // Actions say what to write
	VerdictNoPath      Verdict = "NoPath"      // sidecars run, but no way to stop them exists
)

// ActionKind is one kind of write.
type ActionKind string

const (
	// ActionCreateCRR creates a ContainerRecreateRequest; kruise-daemon stops the containers.
	ActionCreateCRR ActionKind = "ContainerRecreateRequest"
	// ActionSwapImage patches the sidecars' images to a quick-exit image.
	ActionSwapImage ActionKind = "ImageSwap"
	// ActionDeleteCRR deletes a CRR of an earlier stop-order stage whose
	// sidecars are done with: kruise-daemon works on one CRR of a pod at a
	// time, and under restartPolicy Never a CRR stays Recreating until its
	// deadline, so the next stage's CRR would wait behind it.
	ActionDeleteCRR ActionKind = "DeleteContainerRecreateRequest"
	// ActionSettlePhase patches the pod's status to a terminal phase before
	// its ignore-exit-code sidecars are stopped.
	ActionSettlePhase ActionKind = "SettlePhase"
	// ActionRecordAttempt records a CRR attempt of a failed kill on the pod
	// (AnnotationCRRAttempts: attempt, stage, when it began), by
	// compare-and-swap on the value the decision read; only on the failure
	// path, after the attempt's create succeeded (window.go).
	ActionRecordAttempt ActionKind = "RecordAttempt"
	// ActionRecordAPIGone records on the pod when the CRR API was found not
	// served (AnnotationCRRAPIGone, Began), by compare-and-swap on the value
	// the decision read, before an image swap waits on it (crrstate.go).
	ActionRecordAPIGone ActionKind = "RecordCRRAPIGone"
)

// Action is one write. Actions in a plan run in order; a failed one stops the rest.
type Action struct {
	Kind       ActionKind
	Containers []string

	// For ActionCreateCRR.
	CRRName string
	Attempt int
	// Stage is the stop-order stage the CRR or swap is for (0 without an order).
	Stage int
	// ReadPodFirst: the pod's name may be taken by a later pod (it was not
	// generated), so the pod is read live before the CRR, whose spec.podName
	// kruise binds to whichever pod has the name.
	ReadPodFirst bool

	// For ActionSwapImage.
	Swaps []Swap
	// StageMark, when set, is written to the pod's AnnotationStopStage in
	// the same patch: when this stage of the stop order began.
	StageMark string

	// For ActionRecordAttempt (with Stage and Attempt): when the attempt
	// began; zero for the create just before it in the plan, whose answer
	// time is then used. For ActionRecordAPIGone: when the CRR API was found
	// not served.
	Began time.Time

	// For ActionSettlePhase.
	Phase corev1.PodPhase
	// JobRule, when set, names the Job's podFailurePolicy rule the settle
	// (or, for ActionSwapImage, the swap in place of a CRR) keeps from
	// reading a stop's exit code (jobsettle.go).
	JobRule string
	// LeftRunning: the settle is all there is, on a node that cannot stop
	// the sidecars (platform.go); they run on until the pod is deleted.
	LeftRunning bool
}

// Swap replaces the image of spec.containers[Index], expected to be From.
type Swap struct {
	Index     int
	Container string
	From, To  string
}

// Problem is something the pod's owner should know: it becomes a Warning event.
type Problem struct {
	Reason  string
	Message string
}

// Warning event reasons, one per kind of problem.
const (
	ReasonInvalidSidecarEnv        = "InvalidSidecarEnv"
	ReasonInvalidQuickExitImage    = "InvalidQuickExitImage"
	ReasonQuickExitImageNotAllowed = "QuickExitImageNotAllowed"
	ReasonUnknownSidecarName       = "UnknownSidecarName"
	ReasonNoMainContainer          = "NoMainContainer"
	ReasonNoTerminationPath        = "NoTerminationPath"
	// ReasonSidecarLeftRunning: the node cannot stop a sidecar, the phase
	// was settled instead, and the sidecar runs on until the pod is deleted.
	ReasonSidecarLeftRunning  = "SidecarLeftRunning"
	ReasonNodeNotFound        = "NodeNotFound"
	ReasonSidecarKillFailed   = "SidecarKillFailed"
	ReasonSidecarKillGaveUp   = "SidecarKillGaveUp"
	ReasonPhaseSettleRefused  = "PhaseSettleRefused"
	ReasonQuickExitNotRunning = "QuickExitImageNotRunning"
	ReasonInvalidStopOrder    = "InvalidStopOrder"
	ReasonStopOrderHeldUp     = "StopOrderHeldUp"
)

// Plan is the outcome of Decide.
type Plan struct {
	Verdict    Verdict
	Reason     string // one sentence: why this verdict
	Containers []Container
	Actions    []Action
	Problems   []Problem
	// FailedKills names the sidecars whose earlier kill is seen to have failed.
	FailedKills []string
	// MainsDoneAt is when the last main container exited, when they are all done.
	MainsDoneAt time.Time
	// SwapsUnseen names sidecars that have their quick-exit image although
	// Input.SwappedAt has no time for them (a restarted controller): the
	// reconciler records SwapsSince for them, the earliest the swap can
	// have been made, so that restarts do not keep moving the bound on.
	SwapsUnseen []string
	SwapsSince  time.Time
	// NodePath says which way the pod's node can stop a sidecar, and why.
	NodePath string
	// Stage is where the pod is in its stop order; nil without one.
	Stage *StageStatus
	// RequeueAfter asks to look again after this long even if nothing changes.
	RequeueAfter time.Duration
	// CRRs are the pod's CRRs as kruise reports them, for Explain; Decide
	// leaves it empty (CRRStates fills it).
	CRRs []CRRState
	// SecondTerminator, for Explain, is OpenKruise's SidecarTerminator's
	// CRR for the pod when one was found.
	SecondTerminator *SecondTerminator
	// NeedsJob names the pod's owning Job when the plan makes a CRR on a
	// pod whose main failed and the input has not got the Job: the
	// reconciler reads it live (one GET) and decides again (jobsettle.go).
	NeedsJob string
	// JobVerdict is the Job's rule that could read the stop's exit code,
	// when one could: the phase is settled from the mains first.
	JobVerdict *JobVerdictChange
	// AwaitsSecondTerminator: a first CRR waits for kruise's to show
	// (second.go); the reconciler looks for it.
	AwaitsSecondTerminator bool
	// Confirm names what the plan assumed absent or finished and the input
	// cannot vouch for (confirm.go): the reconciler reads it live, in one
	// step, and decides once more before it writes anything.
	Confirm Confirm
}

// DoesNothing reports whether the plan leaves the pod and the cluster as
// they are: the pod ignored or unmarked (VerdictIgnored, VerdictNoSidecars),
// with no action and no problem to warn of. What it may ask to confirm is
// read only. The decision on a pod it does not consider (Considered) is
// such a plan, whatever the rest of the input.
func (p Plan) DoesNothing() bool {
	return (p.Verdict == VerdictIgnored || p.Verdict == VerdictNoSidecars) && len(p.Actions) == 0 && len(p.Problems) == 0
}
