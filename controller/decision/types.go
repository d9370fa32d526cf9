package decision

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The marks a pod carries. The env names are OpenKruise's, so pods written for
// its SidecarTerminator work unchanged.
const (
	EnvTerminate             = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT"
	EnvTerminateWithImage    = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE"
	EnvIgnoreExitCode        = "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE"
	AnnotationSidecars       = "sidecar-terminator.io/sidecars"
	AnnotationQuickExitImage = "sidecar-terminator.io/quick-exit-image"
	// AnnotationStopOrder orders the sidecars' stop: comma-separated names,
	// first stopped first; sidecars it does not name are stopped before them.
	AnnotationStopOrder = "sidecar-terminator.io/stop-order"
	// AnnotationStopStage is written by the controller with a swap that
	// starts a stage ("<stage> <RFC 3339 time>"): a swap leaves no object of
	// its own whose creation time says when the stage began, as a CRR does.
	AnnotationStopStage = "sidecar-terminator.io/stop-stage"
	// AnnotationCRRAttempts records, on a pod whose first kill failed, the
	// CRR attempt made last: kruise deletes finished CRRs (ttl), and a
	// restarted controller remembers nothing, but the count must not reset.
	AnnotationCRRAttempts = "sidecar-terminator.io/crr-attempts"
	// AnnotationCRRAPIGone records, on a pod whose sidecar's image swap waits
	// for stops begun under CRRs whose API went away, the earliest time a
	// replica found that API not served (RFC 3339): the wait counts from it
	// whoever leads later (crrstate.go, stopsAfterCRD).
	AnnotationCRRAPIGone = "sidecar-terminator.io/crr-api-gone-at"

	// ConditionSidecarTerminated is set on a pod whose phase this controller
	// settled before stopping its ignore-exit-code sidecars.
	ConditionSidecarTerminated corev1.PodConditionType = "SidecarTerminated"
)

// Role is what a container is to the controller.
type Role string

const (
	RoleMain          Role = "main"
	RoleSidecar       Role = "sidecar"
	RoleInit          Role = "init"
	RoleNativeSidecar Role = "native-sidecar"
)

// State is a container's state as its status reports it.
type State string

const (
	StateWaiting    State = "waiting"
	StateRunning    State = "running"
	StateTerminated State = "terminated"
	StateUnknown    State = "unknown"
)

// Container is one container of the pod, classified.
type Container struct {
	Name  string
	Index int // index in spec.containers or spec.initContainers
	Role  Role
	Image string // the image in the pod spec

	// Sidecar marks.
	MarkedBy       []string // which marks made it a sidecar: env names or the annotation
	KillByCRR      bool     // may be stopped by a ContainerRecreateRequest
	QuickExitImage string   // valid, allowed image to swap in; empty when none
	// DefaultImage is the operator's default quick-exit image
	// (Policy.DefaultQuickExitImage) for a sidecar that names no image of
	// its own; it is swapped in only where no CRR path exists (kill.go).
	DefaultImage   string
	IgnoreExitCode bool
	// PlatformMark is a platform's own sidecar mark the container carries
	// ("ECI_CONTAINER_TYPE=sidecar"), whatever the node; empty when none.
	PlatformMark string

	// Status.
	State        State
	ExitCode     int32
	RestartCount int32
	ContainerID  string
	FinishedAt   time.Time
	// WasTerminated is true when a previous instance of the container ended
	// (lastState.terminated): it is waiting to be restarted, not new.
	WasTerminated bool
	// WaitingReason says why a waiting container waits (ErrImagePull,
	// ImagePullBackOff, StartError...); StatusImage is the image the node
	// reports it runs.
	WaitingReason string
	StatusImage   string

	// Restart rules of a regular container (restart.go). RestartRules
	// describes them for a person; AfterExit is the kubelet's answer to the
	// container's last exit (when terminated); AfterKill its answer to the
	// exits a stop produces (sidecars); KillBlocked: no stop of ours may
	// touch it (restartsAfterKill).
	RestartRules string
	AfterExit    Restart
	AfterKill    Restart
	KillBlocked  bool
}

// Node is what the controller knows of the pod's node.
type Node struct {
	Name  string
	Found bool
	// Virtual: the operator's virtual-node selector matches the node.
	Virtual bool
	// Platform is what runs the node's pods (platform.go), and PlatformWhy
	// how that is known; empty in a Node built by hand, which then is a
	// virtual-kubelet node when Virtual, else a normal one.
	Platform    Platform
	PlatformWhy string
	// Daemon is what OpenKruise's own objects say of the node's
	// kruise-daemon (kube/daemons.go). A node with none (DaemonAbsent) can
	// run no CRR and is treated like a virtual one. DaemonWhy says how that
	// is known, either way, for explain and the Warning.
	Daemon    DaemonState
	DaemonWhy string
}

// DaemonState is what OpenKruise's objects show of a node's kruise-daemon.
type DaemonState int

const (
	// DaemonUnknown: nothing shows either way (no NodeImage for the node,
	// no NodeImage API, or a daemon still within its grace to show itself);
	// a CRR is tried.
	DaemonUnknown DaemonState = iota
	// DaemonServes: kruise-daemon has written the node's NodeImage status,
	// so it serves the node, and may be stopping a sidecar there under a
	// CRR whatever became of that CRR since.
	DaemonServes
	// DaemonAbsent: the node's NodeImage is older than the grace and
	// kruise-daemon never wrote it, so none runs there.
	DaemonAbsent
)

// CRR is what the decision needs of one ContainerRecreateRequest this
// controller made for the pod.
type CRR struct {
	Name       string
	Attempt    int
	Stage      int // the stop-order stage it was made for; 0 without an order
	Containers []string
	// RestartCounts holds each target's restart count when the CRR was
	// admitted (kruise's statusContext), where known.
	RestartCounts map[string]int32
	Phase         string // Pending, Recreating, Succeeded, Failed, Completed
	// Message is kruise's status.message: why kruise-manager completed it.
	Message string
	// States are kruise-daemon's per-container states (crrstate.go).
	States []CRRContainerState
	// Deadline is the CRR's own activeDeadlineSeconds; zero when unset.
	Deadline  time.Duration
	Created   time.Time
	Completed time.Time
	// Unseen: the cache does not show the CRR, and never will again or at
	// all (deleted by someone else, its CRD removed, or a policy stripped
	// the label the informer lists by), so it is as last seen: its status
	// no longer moves, and kruise-manager's completion of it at its deadline,
	// which carries kruise-daemon's last states, is never seen.
	Unseen bool
	// Deleted: this controller deleted the CRR (or may have: the delete got
	// no answer), and the cache does not show it; it reads as finished.
	Deleted bool
}

// Finished reports whether kruise has stopped working on the CRR.
func (c CRR) Finished() bool {
	return c.Phase == "Completed" || c.Phase == "Succeeded" || c.Phase == "Failed"
}

// deadlineAt is when the CRR's activeDeadlineSeconds runs out, counted from
// its creation as kruise-manager counts it; a CRR without one (made before
// the field was set) gets the deadline this pod's CRRs get now.
func (c CRR) deadlineAt(in Input) time.Time {
	d := c.Deadline
	if d <= 0 {
		d = CRRDeadline(in.Pod, in.Policy)
	}
	return c.Created.Add(d)
}

// Policy holds the operator's knobs.
type Policy struct {
	// AllowedQuickExitImages lists the only images that may be swapped in: a
	// full reference matches exactly, a bare repository matches any tag or
	// digest of it, AllowAnyImage matches every valid image. Empty allows none.
	AllowedQuickExitImages []string
	// CRRDeadline is how long a CRR may run before its kill counts as failed;
	// it is also written as the CRR's activeDeadlineSeconds.
	CRRDeadline time.Duration
	// MaxCRRAttempts bounds the CRRs made for one pod.
	MaxCRRAttempts int
	// RetryBackoff is the wait before the second CRR; it doubles each time.
	// A refused write is retried from the same wait.
	RetryBackoff time.Duration
	// MaxRefusals bounds how often a transiently refused write (5xx, 429,
	// timeouts) is sent for one pod before the controller gives up on it.
	MaxRefusals int
	// SwapStartAllowance is added to the pod's termination grace period to
	// bound how long a swapped sidecar may take to stop: the old container's
	// stop, the quick-exit image's pull and start. Past it, a Warning says
	// why the sidecar still is not terminated.
	SwapStartAllowance time.Duration
	// RefusalBackoffMax caps the backoff between refused writes; a
	// permanently refused write waits this long before its last retry.
	RefusalBackoffMax time.Duration
	// DefaultQuickExitImage is swapped in for marked sidecars that name no
	// quick-exit image of their own, but only where no CRR path exists: no
	// CRR API, a node without kruise-daemon, a CRR refused or failed, a
	// sidecar a CRR cannot stop. It never replaces a working CRR path, so a
	// cluster with OpenKruise behaves as without it until a CRR fails. It
	// must pass AllowedQuickExitImages like any other image; empty: none.
	DefaultQuickExitImage string
}

// DefaultQuickExitRepository is the project's own quick-exit image, the only
// one allowed unless the operator says otherwise.
const DefaultQuickExitRepository = "ghcr.io/sidecar-terminator/quick-exit"

// AllowAnyImage in the allowlist allows every valid image reference.
const AllowAnyImage = "*"

// DefaultPolicy is what the controller runs with unless told otherwise.
func DefaultPolicy() Policy {
	return Policy{AllowedQuickExitImages: []string{DefaultQuickExitRepository}, CRRDeadline: time.Minute, MaxCRRAttempts: 3, RetryBackoff: 5 * time.Second,
		MaxRefusals: 10, RefusalBackoffMax: 5 * time.Minute, SwapStartAllowance: 2 * time.Minute}
}

// Input is everything Decide looks at.
type Input struct {
	Pod    *corev1.Pod
	Node   Node
	CRRs   []CRR
	CRRAPI bool // the ContainerRecreateRequest API is served
	// CRRAPIGoneSince is when the controller learned the CRR API is not
	// served: when it lost it, or its first look if it never saw it. Zero
	// while the API is served (stopsAfterCRD in kill.go says why it counts).
	CRRAPIGoneSince time.Time
	// CRRAPIServedAt is when the controller last found the CRR API served
	// (zero if never): a pod's record of the API's loss from before then is
	// of an earlier loss (crrstate.go).
	CRRAPIServedAt time.Time
	// Refusals are the pod's writes the cluster refused, latest per kind of
	// write, as the reconciler remembers them.
	Refusals []Refusal
	// SwappedAt holds when each sidecar was swapped to its quick-exit image,
	// as far as the reconciler knows (first seen swapped, after a restart).
	SwappedAt map[string]time.Time
	// SecondTerminator is OpenKruise's own SidecarTerminator's CRR for the
	// pod, when the reconciler has looked for it and found it (second.go).
	SecondTerminator *SecondTerminator
	// KruiseTerminatorSeen: that terminator has been seen acting in the
	// cluster, so a pod's first CRR gives it a moment (second.go).
	KruiseTerminatorSeen bool
	Now                  time.Time
	Policy               Policy

	// Job is the pod's owning Job as read live, when a plan asked for it
	// (Plan.NeedsJob); nil when not read (jobsettle.go).
	Job *JobFacts

	// RefusedCRRs are this controller's CRR creates that were refused (or
	// got no answer), as the reconciler remembers them: a CRR under such a
	// name may exist all the same (confirm.go).
	RefusedCRRs []Action
	// Overdue are this controller's writes whose effect the cache has not
	// shown within the expectation timeout: the plan asks the API server
	// whether they took effect (confirm.go).
	Overdue []Action
	// ReadLive names the CRRs read from the API server in this sync, found
	// or not (Plan.Confirm): the plan asks for them no more.
	ReadLive []string
	// WatchedSince is when the reconciler's memory of the pod began: its
	// first sync of the pod in this process, zero when unknown. A memory
	// that began before the mains were done has seen every CRR of the pod's
	// stop made since, in the cache or as its own write (confirm.go).
	WatchedSince time.Time
	// PodLive: the pod was read from the API server in this sync, not the cache.
	PodLive bool
	// SecondTerminatorAwaited: a first CRR of the pod has waited for
	// OpenKruise's SidecarTerminator's CRR (second.go); SecondLooked: the
	// looks for it made so far. Both as remembered.
	SecondTerminatorAwaited bool
	SecondLooked            SecondLook

	// stage is the stop-order stage being planned: set by the stop-order
	// layer on the copy of the input it hands to kill, whose CRRs are then
	// that stage's only.
	stage int
}

// MinCRRDeadline is the shortest activeDeadlineSeconds OpenKruise's CRR
// webhook admits (minDeadlineSeconds = 3 in
// github.com/openkruise/kruise v1.9.1,
// pkg/webhook/containerrecreaterequest/mutating/crr_mutating_handler.go):
// a shorter --crr-deadline would have every CRR refused with 400.
const MinCRRDeadline = 3 * time.Second

// crrDeadlineMargin is added to the pod's termination grace period: the
// daemon's pickup, the SIGKILL after the grace period, the kubelet's report.
const crrDeadlineMargin = 30 * time.Second

// CRRDeadline is the deadline of a CRR for the pod: the policy's, but never
// shorter than the pod's termination grace period plus a margin. kruise-daemon
// stops the container with that grace period (the CRR's strategy carries it);
// a shorter deadline would count a sidecar still draining as a failed kill and
// send a second CRR or a swap into the first stop.
func CRRDeadline(pod *corev1.Pod, p Policy) time.Duration {
	d := p.CRRDeadline
	if min := PodGrace(pod) + crrDeadlineMargin; d < min {
		d = min
	}
	return d
}

// PodGrace is the pod's termination grace period.
func PodGrace(pod *corev1.Pod) time.Duration {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(grace) * time.Second
}
