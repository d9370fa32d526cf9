package reconciler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Labels on the CRRs this controller makes: the controller's informer lists
// only CRRs carrying LabelManagedBy, and finds a pod's by LabelPodUID.
const (
	LabelManagedBy = "sidecar-terminator.io/managed-by"
	ManagedByValue = "sidecar-terminator"
	LabelPodUID    = "sidecar-terminator.io/pod-uid"
	LabelAttempt   = "sidecar-terminator.io/attempt"
	// LabelStage is the stop-order stage a CRR was made for; absent for 0.
	LabelStage       = "sidecar-terminator.io/stage"
	ReasonTerminated = "SidecarTerminating"
	// AnnotationSettled records when the controller settled a pod's phase.
	AnnotationSettled = "sidecar-terminator.io/phase-settled-at"
)

// Config holds the reconciler's knobs.
type Config struct {
	Policy decision.Policy
	// VirtualNodeSelector picks the virtual-kubelet nodes.
	VirtualNodeSelector labels.Selector
	// CRRTTLAfterFinished is written on each CRR, raised per pod to the CRR's
	// stop window (decision.CRRTTL); kruise deletes it that long after it
	// finished.
	CRRTTLAfterFinished time.Duration
	// ExpectationTimeout is how long a write may stay unseen in the cache
	// before the pod is decided afresh.
	ExpectationTimeout time.Duration
	// KruiseDaemonGrace is how long a node's NodeImage may exist without a
	// status write by kruise-daemon before the node is taken to run none
	// (kube/daemons.go holds the rule and why the default is what it is).
	KruiseDaemonGrace time.Duration
}

// DefaultConfig is the production configuration.
func DefaultConfig() Config {
	return Config{
		Policy:              decision.DefaultPolicy(),
		VirtualNodeSelector: labels.SelectorFromSet(labels.Set{"type": "virtual-kubelet"}),
		CRRTTLAfterFinished: 30 * time.Minute,
		ExpectationTimeout:  time.Minute,
		KruiseDaemonGrace:   DefaultKruiseDaemonGrace,
	}
}

// Reconciler syncs one pod at a time; Sync is safe to call from many workers
// as long as no two run for the same key at once (the workqueue ensures it).
type Reconciler struct {
	cfg     Config
	read    Reader
	write   Writer
	live    LiveReader
	events  Recorder
	metrics *Metrics
	clock   clock.PassiveClock

	// mu guards pods and tracked, and the one part of a pod's memory the
	// informer's handlers read beside its sync: the echo note (echo.go).
	mu      sync.Mutex
	pods    map[cache.ObjectName]*podMemory
	tracked int // pods whose memory says tracked: kept, not recounted, so a sync stays O(1)
	// kruiseSeen: OpenKruise's own SidecarTerminator was seen acting on a
	// pod (second.go).
	kruiseSeen atomic.Bool
	// crrAPILost: when this reconciler first found the CRR API not served
	// since it last found it served (Unix nanoseconds; 0 while served).
	crrAPILost atomic.Int64
	// crrAPIServed: when it last found the CRR API served (Unix nanoseconds).
	crrAPIServed atomic.Int64
	// jobs: what was read of pods' owning Jobs (jobverdict.go).
	jobs jobPolicies
}

// New returns a reconciler that reads the cluster through r (its caches),
// writes through w, and reads past the caches through live (confirm.go).
// live is required: a nil one panics, and a caller that means its
// reconciler to read nothing live says so with NoLiveReads. metrics may be
// nil.
func New(cfg Config, r Reader, w Writer, live LiveReader, events Recorder, metrics *Metrics, clk clock.PassiveClock) *Reconciler {
	if live == nil {
		panic("reconciler.New: no LiveReader; pass NoLiveReads{} for a reconciler that is to read nothing live")
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	rec := &Reconciler{cfg: cfg, read: r, write: w, live: live, events: events, metrics: metrics, clock: clk,
		pods: map[cache.ObjectName]*podMemory{}}
	metrics.watchWaiting(rec.oldestWaiting)
	return rec
}

// Sync brings one pod closer to done. It returns when to look again even if
// nothing changes (zero for never), or an error to retry with backoff.
//
// One sync has one shape (docs/design.md, "One sync"):
//
//  1. observe: the pod and its CRRs from the cache and what is remembered of
//     them, as one decision.Input (plan.go, observe);
//  2. decide (decision.Decide);
//  3. confirm: what the plan names as assumed (Plan.Confirm) is read live in
//     one step, and the pod decided once more (confirm.go);
//  4. apply: the plan's writes, each answer returned as a value (apply.go);
//  5. absorb: the decision and the answers into the pod's memory, the only
//     place it changes, with the events, metrics and log lines (absorb.go).
//
// A refused write is decided on at once: the sync goes round again from
// observe, with the refusal remembered, so a refused CRR turns into an image
// swap (or a backoff, whose wait the next plan returns) in the same sync.
// The decision never plans a write whose refusal's backoff is running, so
// each round refuses a different kind of write, and the rounds end.
//
// A wake with nothing to decide (IdleWake: a pod the decision does not
// consider and the reconciler does not remember) reads and decides nothing.
func (r *Reconciler) Sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	if r.IdleWake(key) {
		return 0, nil
	}
	logger := klog.FromContext(ctx).WithValues("pod", key.String())
	pod, err := r.read.Pod(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		r.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read pod %s: %w", key, err)
	}
	mem := r.memory(key, pod.UID)
	now := r.clock.Now()
	// Wait while the cache has not shown an earlier write; one overdue is
	// checked live (expect.go).
	wait, gate, ok := r.awaitCache(logger, pod, mem, now)
	if !ok {
		return wait, nil
	}
	var live liveReads // what this sync read from the API server
	for pass := 0; ; pass++ {
		observed, err := r.observe(pod, mem, now)
		if err != nil {
			return 0, err
		}
		live.into(&observed)
		if pass == 0 {
			observed.Overdue = gate.overdue
		}
		in, plan, got, lags, err := r.decideConfirmed(ctx, logger, observed, mem, gate, &live)
		switch {
		case err != nil:
			return 0, err
		case lags:
			return r.requeueAfter(mem, 0, now), nil
		}
		pod = in.Pod
		var results []result
		if plan.Confirm.Empty() {
			results = r.apply(ctx, pod, mem, plan, pass)
		}
		live.wrote(results)
		again, err := r.absorb(logger, key, in, mem, gate, plan, got, results)
		gate = cacheGate{}
		if err != nil {
			return 0, err
		}
		switch {
		case again && pass < len(refusalKinds):
			continue
		case again:
			// Rounds capped: only a retry backoff shorter than the sync
			// itself (--crr-retry-backoff=0) gets here. Zero would mean
			// "never look again"; a second does not.
			return max(r.cfg.Policy.RetryBackoff, time.Second), nil
		}
		if plan.Verdict == decision.VerdictIgnored {
			r.forget(key)
		}
		return r.requeueAfter(mem, plan.RequeueAfter, now), nil
	}
}

// decideConfirmed is steps 2 and 3: it decides, and where the plan names
// what it assumed, reads that live and decides once more on it. lags: every
// overdue write was found in effect, so the cache only lags and the pod is
// not decided on it now (absorbed already). A failed read is an error, with
// what was read absorbed.
func (r *Reconciler) decideConfirmed(ctx context.Context, logger klog.Logger, in decision.Input, mem *podMemory, gate cacheGate, live *liveReads) (decision.Input, decision.Plan, confirmed, bool, error) {
	plan := decide(in)
	if plan.Confirm.Empty() {
		return in, plan, confirmed{}, false, nil
	}
	in, got, err := r.confirm(ctx, in, plan.Confirm)
	if err != nil {
		r.absorbSeen(mem, in, got)
		return in, plan, got, false, err
	}
	live.add(in)
	if len(in.Overdue) > 0 && r.cacheLags(logger, in, mem, gate, got) {
		return in, plan, got, true, nil
	}
	if got.gone != "" {
		return in, decision.Plan{Verdict: decision.VerdictIgnored, Reason: got.gone}, got, false, nil
	}
	return in, decide(in), got, false, nil
}

// decide is the decision on one input, with the Warning about OpenKruise's
// own SidecarTerminator where its CRR was found.
func decide(in decision.Input) decision.Plan {
	return decision.WithSecondTerminator(decision.Decide(in), in)
}
