package reconciler

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// absorb is a sync's last step and the only one that changes the pod's
// memory (podmemory.go): what was observed and read live, the decision, and
// each write's answer. It makes them visible too: a Warning event per new
// problem, a Normal event per write that took effect, the metrics and one
// log line per decision and per write. again reports that the pod is to be
// decided once more now: a write was refused, or the plan still asks for a
// live read. A write refused as stale is returned as an error.
func (r *Reconciler) absorb(logger klog.Logger, key cache.ObjectName, in decision.Input, mem *podMemory, gate cacheGate, plan decision.Plan, got confirmed, results []result) (again bool, _ error) {
	absorbGate(mem, gate)
	r.absorbSeen(mem, in, got)
	for _, c := range plan.SwapsUnseen {
		since := plan.SwapsSince
		if since.IsZero() {
			since = in.Now
		}
		mem.swapped(c, since)
	}
	if plan.AwaitsSecondTerminator {
		mem.lookForSecond(awaited)
	}
	if got.job != nil {
		switch {
		case got.job.Policy == nil && got.job.Missing:
			r.metrics.JobReads.WithLabelValues(JobReadNotFound).Inc()
		case plan.JobVerdict != nil && swapsForJob(plan):
			r.metrics.JobReads.WithLabelValues(JobReadSwap).Inc()
		case plan.JobVerdict != nil:
			r.metrics.JobReads.WithLabelValues(JobReadSettle).Inc()
		default:
			r.metrics.JobReads.WithLabelValues(JobReadNoChange).Inc()
		}
	}
	r.metrics.Decisions.WithLabelValues(string(plan.Verdict)).Inc()
	r.track(key, plan.Verdict)
	r.noteWaiting(mem, plan)
	r.report(logger, in.Pod, mem, plan, len(results) > 0)
	r.noteSecondTerminator(logger, mem, plan)
	// A decision that wrote is logged by its writes' lines, which name it.
	logger = logger.WithValues("verdict", plan.Verdict, "reason", plan.Reason)
	for _, res := range results {
		if refused, err := r.absorbResult(logger, in.Pod, mem, plan, res); err != nil || refused {
			return refused, err
		}
	}
	return !plan.Confirm.Empty(), nil
}

// cacheLags settles the writes the cache had not shown in time, by what the
// API server showed (the confirm step). All in effect: the cache only lags,
// the wait for it goes on, and the pod is not decided on it (true). Else
// (undone, never listed, or the pod gone) the pod is decided
// afresh, which is said and counted, since the cache and the cluster
// disagree. Part of absorb: the memory takes in the reads either way.
func (r *Reconciler) cacheLags(logger klog.Logger, in decision.Input, mem *podMemory, gate cacheGate, got confirmed) bool {
	absorbGate(mem, gate)
	r.absorbSeen(mem, in, got)
	waited := mem.waitedFor(in.Now)
	if got.gone == "" && inEffect(in, got) {
		logger.Info("The cache lags: an earlier write is in effect at the API server but not yet in the cache; waiting for it rather than writing again",
			"pending", describePending(in.Overdue), "after", waited.String())
		mem.stillUnseen(in.Now)
		return true
	}
	r.metrics.ExpectationsTimedOut.Inc()
	logger.Info("Expectation timed out: deciding afresh", "pending", describePending(in.Overdue), "after", waited.String())
	mem.cacheCaughtUp()
	return false
}

// inEffect reports whether the API server showed every overdue write in
// effect in a way the cache will show too. An own CRR the informer never
// lists is remembered as read (absorbSeen), and is no write to wait for.
func inEffect(in decision.Input, got confirmed) bool {
	for _, a := range in.Overdue {
		switch a.Kind {
		case decision.ActionCreateCRR:
			stripped, found := got.unlisted[a.CRRName]
			if !found || stripped {
				return false
			}
		case decision.ActionDeleteCRR:
			if !got.absent[a.CRRName] {
				return false
			}
		default:
			if !in.PodLive || !podShows(in.Pod, a) {
				return false
			}
		}
	}
	return true
}

// absorbSeen remembers the pod's CRRs as the cache showed them and as they
// were read live, and what else the confirm step read.
func (r *Reconciler) absorbSeen(mem *podMemory, in decision.Input, got confirmed) {
	for _, c := range in.CRRs {
		if !c.Unseen {
			mem.seeCRR(c)
		}
	}
	for _, c := range got.crrs {
		mem.liveCRRSeen(c)
	}
	if got.job != nil {
		mem.readJob(got.job)
	} else if got.jobCached != nil {
		mem.readJob(got.jobCached)
	}
	if got.looked != 0 {
		mem.lookForSecond(int(got.looked))
	}
	if got.second != nil {
		mem.secondFound(got.second)
	}
}

// absorbResult takes in one write's answer. A refused write is remembered
// for the decision (refused true) rather than returned as an error:
// retrying it blindly is what the decision is for.
func (r *Reconciler) absorbResult(logger klog.Logger, pod *corev1.Pod, mem *podMemory, plan decision.Plan, res result) (refused bool, _ error) {
	a := res.action
	method := string(a.Kind)
	at := func() time.Time { return res.at }
	if err := res.err; err != nil {
		what, refusal := classify(err, a)
		if what == outcomeStale {
			// The pod moved on: decide again on fresh state, once the cache
			// shows it (awaitCache).
			mem.staleOn(r.view(pod), res.at)
			r.metrics.Actions.WithLabelValues(method, ResultStale).Inc()
			logger.Info("Action failed", "method", method, "containers", a.Containers, "err", boundedMessage(err.Error()))
			return false, fmt.Errorf("%s for pod %s/%s: %w", method, pod.Namespace, pod.Name, err)
		}
		refusal = mem.refusedWrite(a, refusal, at)
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
	// The write's expectation: the cache must show it before the pod is
	// decided again (awaitCache).
	mem.expect(a, at)
	mem.wrote(a, res.made, at)
	result := ResultSuccess
	if res.alreadyDone {
		result = ResultAlreadyDone
	}
	r.metrics.Actions.WithLabelValues(method, result).Inc()
	if result == ResultSuccess {
		if !plan.MainsDoneAt.IsZero() {
			r.metrics.Latency.WithLabelValues(method).Observe(res.at.Sub(plan.MainsDoneAt).Seconds())
		}
		r.events.Event(pod, corev1.EventTypeNormal, ReasonTerminated, describe(a))
	}
	logger.Info("Action", "method", method, "containers", a.Containers, "result", result, "crr", a.CRRName)
	return false, nil
}

// report turns the plan's problems into Warning events (once per pod and
// message) and logs the decision; one that wrote (wrote) is logged at
// verbosity 2 only, since each write's line names it: one line per
// decision, not two. Over a 20,000-pod burst the two lines of each acting
// pod cost 1.9 s of the controller's 41.7 s of CPU (e2e/bench's profile),
// each paying klog's header (runtime.Caller) and a write to stderr.
func (r *Reconciler) report(logger klog.Logger, pod *corev1.Pod, mem *podMemory, plan decision.Plan, wrote bool) {
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
	if wrote {
		v = max(v, 2)
	}
	logger.V(v).Info("Decision", "verdict", plan.Verdict, "reason", plan.Reason, "actions", len(plan.Actions))
}
