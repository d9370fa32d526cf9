package reconciler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
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
	events  Recorder
	metrics *Metrics
	clock   clock.PassiveClock

	mu      sync.Mutex
	pods    map[cache.ObjectName]*podMemory
	tracked int // pods whose memory says tracked: kept, not recounted, so a sync stays O(1)
	// kruiseSeen: OpenKruise's own SidecarTerminator was seen acting on a
	// pod (second.go).
	kruiseSeen atomic.Bool
	// crrAPILost: when this reconciler first found the CRR API not served
	// since it last found it served (Unix nanoseconds; 0 while served).
	crrAPILost atomic.Int64
	// echoes: the writes whose echo the informer's handlers drop (echo.go).
	echoes echoes
}

// New returns a reconciler. metrics may be nil.
func New(cfg Config, r Reader, w Writer, events Recorder, metrics *Metrics, clk clock.PassiveClock) *Reconciler {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	rec := &Reconciler{cfg: cfg, read: r, write: w, events: events, metrics: metrics, clock: clk,
		pods: map[cache.ObjectName]*podMemory{}}
	metrics.watchWaiting(rec.oldestWaiting)
	return rec
}

// Sync brings one pod closer to done. It returns when to look again even if
// nothing changes (zero for never), or an error to retry with backoff.
//
// One sync observes the pod, its CRRs and its memory (podmemory.go) as one
// decision.Input, decides, confirms live what the plan may have missed
// (seeUnseenCRR), acts on it, and the memory absorbs each write's answer
// (docs/design.md, "One sync").
func (r *Reconciler) Sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("pod", key.String())
	// Read: the pod from the cache, and what is remembered of it; wait while
	// the cache has not shown an earlier write.
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
	if wait, ok, err := r.awaitCache(ctx, logger, pod, mem, now); err != nil || !ok {
		return wait, err
	}
	if err := r.noteCRRs(pod, mem); err != nil {
		return 0, err
	}

	// A refused write is remembered and the pod decided again at once, so a
	// refused CRR turns into an image swap (or a backoff, whose wait the
	// next plan returns) in the same sync. The decision never plans a write
	// whose refusal's backoff is running, so each pass refuses a different
	// kind of write, and the passes end.
	for pass := 0; ; pass++ {
		var plan decision.Plan
		if pod, plan, err = r.decide(ctx, pod, mem, now, pass); err != nil {
			return 0, err
		}
		r.record(logger, key, pod, mem, plan, now)
		refused, err := r.actOn(ctx, logger, pod, mem, plan, pass)
		if err != nil {
			return 0, err
		}
		if refused && pass < len(refusalKinds) {
			continue
		}
		if refused {
			// Passes capped: only a retry backoff shorter than the sync itself
			// (--crr-retry-backoff=0) gets here. Zero would mean "never look
			// again"; a second does not.
			return max(r.cfg.Policy.RetryBackoff, time.Second), nil
		}
		if plan.Verdict == decision.VerdictIgnored {
			r.forget(key)
		}
		return r.requeueAfter(mem, plan.RequeueAfter, now), nil
	}
}

// decide plans the pod's next step from the pod and its memory. On a
// sync's first pass a correction is decided again on the live pod; a CRR in
// the way of one the plan makes, which the decision was not given, is read
// live and the pod decided again with it.
func (r *Reconciler) decide(ctx context.Context, pod *corev1.Pod, mem *podMemory, now time.Time, pass int) (*corev1.Pod, decision.Plan, error) {
	plan, err := r.plan(pod, mem, now)
	if err != nil {
		return pod, plan, err
	}
	if plan, err = r.withJob(ctx, pod, mem, now, plan); err != nil {
		return pod, plan, err
	}
	if pass == 0 {
		if pod, plan, err = r.recheckCorrection(ctx, pod, mem, plan, now); err != nil {
			return pod, plan, err
		}
	}
	if found, err := r.seeUnseenCRR(ctx, pod, mem, plan); err != nil {
		return pod, plan, err
	} else if found {
		if plan, err = r.plan(pod, mem, now); err != nil {
			return pod, plan, err
		}
	}
	return pod, plan, nil
}

// record makes the decision visible and remembered before any write: the
// swaps found made, the metrics and the pods-tracked gauge, the pod's wait,
// the Warnings and the log line, a second terminator. It writes nothing to
// the API: every write is an action (act).
func (r *Reconciler) record(logger klog.Logger, key cache.ObjectName, pod *corev1.Pod, mem *podMemory, plan decision.Plan, now time.Time) {
	for _, c := range plan.SwapsUnseen {
		since := plan.SwapsSince
		if since.IsZero() {
			since = now
		}
		mem.swapped(c, since)
	}
	r.metrics.Decisions.WithLabelValues(string(plan.Verdict)).Inc()
	r.track(key, plan.Verdict)
	r.noteWaiting(mem, plan)
	r.report(logger, pod, mem, plan)
	r.noteSecondTerminator(logger, mem, plan)
}

// actOn carries out the plan's actions in order, up to the first refused
// one (refused true); an action sent in an earlier pass of this sync is not
// sent again.
func (r *Reconciler) actOn(ctx context.Context, logger klog.Logger, pod *corev1.Pod, mem *podMemory, plan decision.Plan, pass int) (refused bool, _ error) {
	for _, action := range plan.Actions {
		if pass > 0 && mem.sentThisSync(action) {
			// Sent in an earlier pass: the cache cannot show it yet.
			continue
		}
		refused, err := r.act(ctx, logger, pod, mem, plan, action)
		if err != nil || refused {
			return refused, err
		}
	}
	return false, nil
}

func (r *Reconciler) plan(pod *corev1.Pod, mem *podMemory, now time.Time) (decision.Plan, error) {
	in, err := r.memoryInput(pod, mem, now)
	if err != nil {
		return decision.Plan{}, err
	}
	plan := decision.Decide(in)
	if in2, ok := r.lookForSecondTerminator(pod, mem, in, plan); ok {
		plan = decision.WithSecondTerminator(decision.Decide(in2), in2)
	}
	return plan, nil
}

// report turns the plan's problems into Warning events (once per pod and
// message) and logs the decision.
func (r *Reconciler) report(logger klog.Logger, pod *corev1.Pod, mem *podMemory, plan decision.Plan) {
	for _, p := range plan.Problems {
		// Bounded here too, whoever built the message: it is the dedup key,
		// client-go's event cache key and a log line.
		msg := decision.BoundMessage(p.Message)
		if !mem.firstWarning(p.Reason + "\x00" + msg) {
			continue
		}
		r.events.Event(pod, corev1.EventTypeWarning, p.Reason, msg)
		r.metrics.Warnings.WithLabelValues(p.Reason).Inc()
		logger.Info("Warning", "reason", p.Reason, "message", msg)
	}
	for _, c := range plan.FailedKills {
		if mem.firstFailedKill(c) {
			r.metrics.FailedKills.WithLabelValues(string(decision.ActionCreateCRR)).Inc()
		}
	}
	v := 4
	switch plan.Verdict {
	case decision.VerdictAct, decision.VerdictNoPath, decision.VerdictNoMain:
		v = 0
	case decision.VerdictDone, decision.VerdictInProgress:
		v = 2
	}
	logger.V(v).Info("Decision", "verdict", plan.Verdict, "reason", plan.Reason, "actions", len(plan.Actions))
}

// act carries out one action: raise the expectation, write, and record. A
// refused write is remembered for the decision (refused true) rather than
// returned as an error: retrying it blindly is what the decision is for.
func (r *Reconciler) act(ctx context.Context, logger klog.Logger, pod *corev1.Pod, mem *podMemory, plan decision.Plan, a decision.Action) (refused bool, _ error) {
	method := string(a.Kind)
	if a.Kind == decision.ActionRecordAttempt && a.Began.IsZero() {
		// The record of the create just made: it began when the create was
		// answered, no earlier than kruise's creation time.
		a.Began = r.clock.Now()
		if name := decision.StageCRRName(pod, a.Stage, a.Attempt); mem.knowsCRR(name) {
			a.Began = mem.crr(name).Created
		}
	}
	mem.expect(a, r.clock.Now)
	// Noted before the send: the watch may bring the echo before the answer.
	r.echoes.expectEcho(pod, a, happyPath(pod, plan, mem, r.cfg.Policy))
	err := r.send(ctx, pod, a)
	result := ResultSuccess
	switch {
	case err == nil:
	case a.Kind == decision.ActionCreateCRR && apierrors.IsAlreadyExists(err):
		// Made by an earlier run of this controller: the work is done.
		result, err = ResultAlreadyDone, nil
	case r.createdAfterAll(ctx, pod, a, err):
		result, err = ResultAlreadyDone, nil
	}
	stillThere := false
	if err != nil && a.Kind == decision.ActionDeleteCRR && noAnswer(err) {
		var gone bool
		if gone, stillThere = r.deletedAfterAll(ctx, pod, a); gone {
			result, err = ResultAlreadyDone, nil
		}
	}
	if err != nil || result != ResultSuccess {
		// No write of ours, or one made earlier: no echo of this send.
		r.echoes.unexpect(pod)
	}
	if err != nil {
		mem.unexpect(a)
		what, refusal := classify(err, a)
		if stillThere {
			// The API server shows the CRR: the delete was not applied, and
			// the next stage's CRR must not be made beside it.
			refusal.MaybeApplied = false
		}
		if what == outcomeStale {
			// The pod moved on: decide again on fresh state, once the cache
			// shows it (awaitCache).
			r.staleWrite(pod, mem, r.clock.Now())
			r.metrics.Actions.WithLabelValues(method, ResultStale).Inc()
			logger.Info("Action failed", "method", method, "containers", a.Containers, "err", boundedMessage(err.Error()))
			return false, fmt.Errorf("%s for pod %s/%s: %w", method, pod.Namespace, pod.Name, err)
		}
		refusal = mem.refusedWrite(a, refusal, r.clock.Now)
		class := "transient"
		if refusal.Permanent {
			class = "permanent"
		}
		r.metrics.Actions.WithLabelValues(method, ResultError).Inc()
		r.metrics.Refusals.WithLabelValues(method, class).Inc()
		logger.Info("Write refused", "method", method, "containers", a.Containers, "crr", a.CRRName, "class", class,
			"code", refusal.Code, "reason", refusal.Reason, "message", refusal.Message, "count", refusal.Count)
		if a.Kind == decision.ActionCreateCRR && apierrors.IsNotFound(err) {
			r.crrAPIGone(logger)
		}
		return true, nil
	}
	var made *kruisev1alpha1.ContainerRecreateRequest
	if a.Kind == decision.ActionCreateCRR {
		made = r.newCRR(pod, a)
	}
	mem.wrote(a, made, r.clock.Now)
	r.metrics.Actions.WithLabelValues(method, result).Inc()
	if result == ResultSuccess {
		if !plan.MainsDoneAt.IsZero() {
			r.metrics.Latency.WithLabelValues(method).Observe(r.clock.Since(plan.MainsDoneAt).Seconds())
		}
		r.events.Event(pod, corev1.EventTypeNormal, ReasonTerminated, describe(a))
	}
	logger.Info("Action", "method", method, "containers", a.Containers, "result", result, "crr", a.CRRName)
	return false, nil
}

func (r *Reconciler) send(ctx context.Context, pod *corev1.Pod, a decision.Action) error {
	switch a.Kind {
	case decision.ActionCreateCRR:
		return r.write.CreateCRR(ctx, r.newCRR(pod, a), a.ReadPodFirst)
	case decision.ActionRecordAttempt:
		// A compare-and-swap on the record the decision read: a replica
		// whose view is older never moves it back (decision/window.go).
		// The cache keeps only our annotations, so a pod that shows none may
		// have others: the key is added to the map first, and the map itself
		// only if the pod has none at all.
		value := decision.AttemptRecord(a.Stage, a.Attempt, a.Began)
		patch, err := annotationPatch(pod, decision.AnnotationCRRAttempts, value, false)
		if err != nil {
			return err
		}
		err = r.write.PatchPod(ctx, pod.Namespace, pod.Name, patch)
		if err == nil || len(pod.Annotations) > 0 || !testOpFailed(err) {
			return err
		}
		if patch, err = annotationPatch(pod, decision.AnnotationCRRAttempts, value, true); err != nil {
			return err
		}
		return r.write.PatchPod(ctx, pod.Namespace, pod.Name, patch)
	case decision.ActionDeleteCRR:
		return r.write.DeleteCRR(ctx, pod.Namespace, a.CRRName)
	case decision.ActionSwapImage:
		patch, err := swapPatch(pod, a.Swaps, a.StageMark)
		if err != nil {
			return err
		}
		return r.write.PatchPod(ctx, pod.Namespace, pod.Name, patch)
	case decision.ActionSettlePhase:
		now := r.clock.Now()
		patch, err := settlePatch(pod, a.Phase, now)
		if err != nil {
			return err
		}
		if err := r.write.PatchPodStatus(ctx, pod.Namespace, pod.Name, patch); err != nil {
			return err
		}
		// A status change alone does not make the kubelet sync the pod, and
		// until it does, its status manager writes its own cached phase
		// (Running) back every 10 s. A change to the pod's metadata makes it
		// sync at once: it then sees the terminal phase, keeps it, and stops
		// the remaining containers itself.
		return r.write.AnnotatePod(ctx, pod.Namespace, pod.Name, pod.UID, AnnotationSettled, now.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

func describe(a decision.Action) string {
	switch a.Kind {
	case decision.ActionCreateCRR:
		return fmt.Sprintf("Stopping sidecars %v: created ContainerRecreateRequest %s (attempt %d); kruise-daemon stops them", a.Containers, a.CRRName, a.Attempt)
	case decision.ActionDeleteCRR:
		return fmt.Sprintf("Deleted ContainerRecreateRequest %s of stop-order stage %d (for %v), whose turn is over, so that kruise-daemon takes up the next stage's", a.CRRName, a.Stage, a.Containers)
	case decision.ActionRecordAttempt:
		return fmt.Sprintf("Recorded ContainerRecreateRequest attempt %d of stop-order stage %d, begun at %s, on the pod (%s), so that the count and the attempt's stop window outlive its CRR",
			a.Attempt, a.Stage, a.Began.UTC().Format(time.RFC3339), decision.AnnotationCRRAttempts)
	case decision.ActionSwapImage:
		return fmt.Sprintf("Stopping sidecars %v: swapped their image for the quick-exit image %s", a.Containers, a.Swaps[0].To)
	case decision.ActionSettlePhase:
		if a.JobRule != "" {
			return fmt.Sprintf("Settled the pod's phase to %s (condition %s) from its main containers before stopping sidecars %v: %s", a.Phase, decision.ConditionSidecarTerminated, a.Containers, a.JobRule)
		}
		if a.LeftRunning {
			return fmt.Sprintf("Settled the pod's phase to %s (condition %s) from its main containers; the node cannot stop sidecars %v, which run on until the pod is deleted", a.Phase, decision.ConditionSidecarTerminated, a.Containers)
		}
		fallthrough
	default:
		return fmt.Sprintf("Settled the pod's phase to %s (condition %s) before stopping ignore-exit-code sidecars %v", a.Phase, decision.ConditionSidecarTerminated, a.Containers)
	}
}
