package sim

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Images the simulated nodes know.
const (
	WorkloadImage  = "ghcr.io/sidecar-terminator/workload:dev"
	QuickExitImage = "ghcr.io/sidecar-terminator/quick-exit:dev"
	// MissingImage cannot be pulled anywhere: a sidecar with it never starts.
	MissingImage = "registry.invalid/missing:1"
	// UnknownQuickExit is a valid reference that no node can pull.
	UnknownQuickExit = "registry.invalid/quick-exit:404"
)

// Expect is what the checker demands of a pod once its mains are done.
type Expect int

const (
	// ExpectTerminal: the pod reaches Succeeded or Failed within the bound.
	ExpectTerminal Expect = iota
	// ExpectWarning: no termination path; a Warning event says so.
	ExpectWarning
	// ExpectEither: random faults decide; one or the other.
	ExpectEither
	// ExpectIgnored: the controller must never write for the pod.
	ExpectIgnored
	// ExpectWarnedTerminal: a Warning (a refused kill) and, within the
	// bound all the same, Succeeded or Failed.
	ExpectWarnedTerminal
)

// Scenario is one named situation: a cluster, a mix of pods, faults.
type Scenario struct {
	Name    string
	Purpose string // one line
	Pods    int
	// Arrival spreads the pods' creation evenly over this window.
	Arrival   time.Duration
	Nodes     []NodeGroup
	Templates []Template
	Faults    Faults
	NoCRRAPI  bool
	// KruiseTerminator runs OpenKruise's own SidecarTerminator beside the
	// controller (kruiseterm.go).
	KruiseTerminator bool
	// AllowedImages is the controller's quick-exit image allowlist.
	AllowedImages []string // empty: any image ('*')
	// DefaultQuickExitImage is the controller's --default-quick-exit-image.
	DefaultQuickExitImage string
	// CRRTTLSetting is the controller's --crr-ttl-after-finished (zero: its
	// default). The controller raises it per pod to the stop window.
	CRRTTLSetting time.Duration
	// MaxCRRsPerPod, when set, is a safety bound: no pod gets more CRRs
	// (the controller's attempts, which must not reset).
	MaxCRRsPerPod int
	// Bound is how long after its mains are done a pod may take to finish.
	Bound time.Duration
	// Quiesce is how long the world must stay settled before the run ends,
	// so a late wrong write is still seen.
	Quiesce time.Duration
	// SyncCost is how long one sync holds the controller's one worker: a
	// long one stands for few workers writing to a loaded API server, and
	// a burst then queues (zero: syncCost).
	SyncCost time.Duration
	// WriteCost is how long each API call of a sync holds the worker on
	// top of SyncCost (zero: measuredWriteCost). FreeWrites makes the calls
	// cost the worker nothing, as the model did before it was measured.
	WriteCost  time.Duration
	FreeWrites bool
}

// NodeGroup is Count identical nodes.
type NodeGroup struct {
	Count   int
	Virtual bool
	// Missing lists images this group cannot pull besides MissingImage.
	Missing []string
	Daemon  DaemonSpec
	// IgnoresImageUpdates: the node (a virtual-kubelet provider) takes a
	// pod's new image into its spec but never restarts the container.
	IgnoresImageUpdates bool
	// NoDaemon: normal nodes where no kruise-daemon runs at all (a pool the
	// DaemonSet excludes); OpenKruise's NodeImage shows it (kube/daemons.go).
	NoDaemon bool
	// Platform, when set, makes the group's nodes say what that platform's
	// nodes say (platforms.go) and behave as its capabilities say; Virtual
	// and IgnoresImageUpdates follow from it.
	Platform decision.Platform
}

// DaemonSpec shapes kruise-daemon on a group of normal nodes.
type DaemonSpec struct {
	Pickup time.Duration // delay before it acts on a CRR (slow: large)
	// DownFraction of the group's daemons are down from the start for
	// DownFor (forever when zero).
	DownFraction float64
	DownFor      time.Duration
	FailRate     float64 // CRRs it fails without stopping anything
}

// Template is one kind of pod in a scenario's mix.
type Template struct {
	Name          string
	Weight        int
	RestartPolicy corev1.RestartPolicy
	Init          []C
	Native        []C // init containers with restartPolicy Always
	Containers    []C
	Annotations   map[string]string
	Virtual       bool // placed on a virtual node; otherwise on a normal one
	// Platform, when set, places the pod on a node of that platform.
	Platform decision.Platform
	Expect   Expect
	// DeleteAt deletes the pod this long after creation (zero: never);
	// DeleteAfterMainsDone deletes it that long after its mains are done.
	DeleteAt, DeleteAfterMainsDone Range
	// Recreate makes a new pod of the same name once a deleted one is gone.
	Recreate bool
	// BackoffLimit, when set, has the Job controller delete the pod once its
	// mains restarted more often than this (OnFailure).
	BackoffLimit int
	Grace        int64 // terminationGracePeriodSeconds; zero keeps 30
	// NativeOptIn labels the pod for the native-sidecar webhook, which
	// converts it at creation where it can (admission.go); WebhookDown
	// admits it unchanged, as failurePolicy Ignore does when the webhook
	// cannot be reached.
	NativeOptIn, WebhookDown bool
	// JobPolicy, when set, makes each pod owned by a Job of its own with
	// this podFailurePolicy (jobverdict.go).
	JobPolicy *batchv1.PodFailurePolicy
}

// C is one container of a template.
type C struct {
	Name    string
	Sidecar bool // the truth the checker judges by, not a mark
	Image   string
	// Main: runs Seconds, exits with ExitCodes (successive runs).
	Seconds   Range
	ExitCodes []int32
	// Sidecar: "exit:0", "exit:1" or "ignore".
	OnSIGTERM string
	Env       []corev1.EnvVar
	NoArgs    bool // argv is not the workload's (an injected proxy)
	// The container's own restartPolicy and restartPolicyRules (KEP-5307).
	Policy *corev1.ContainerRestartPolicy
	Rules  []corev1.ContainerRestartRule
}

// Range is a duration drawn uniformly from [Min, Max].
type Range struct{ Min, Max time.Duration }

func (r Range) zero() bool { return r.Max == 0 }

func (s *Sim) draw(r Range) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(s.rng.Int64N(int64(r.Max-r.Min)))
}

func (sc Scenario) withDefaults() Scenario {
	if sc.Pods == 0 {
		sc.Pods = 200
	}
	if sc.Arrival == 0 {
		sc.Arrival = time.Duration(sc.Pods) * 20 * time.Millisecond
		if sc.Arrival < time.Minute {
			sc.Arrival = time.Minute
		}
	}
	if len(sc.Nodes) == 0 {
		sc.Nodes = []NodeGroup{{Count: 10}}
	}
	if sc.Bound == 0 {
		sc.Bound = 15 * time.Minute
	}
	if sc.SyncCost == 0 {
		sc.SyncCost = syncCost
	}
	switch {
	case sc.FreeWrites:
		sc.WriteCost = 0
	case sc.WriteCost == 0:
		sc.WriteCost = measuredWriteCost
	}
	if sc.Quiesce == 0 {
		sc.Quiesce = 3 * time.Minute
	}
	sc.Faults = sc.Faults.withDefaults()
	return sc
}

// sidecarNames are the template's sidecars, in spec order.
func (t *Template) sidecarNames() []string {
	var out []string
	for _, c := range t.Containers {
		if c.Sidecar {
			out = append(out, c.Name)
		}
	}
	return out
}
