package reconciler

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// awaitCache says whether the pod may be decided now, and if not, when to
// look again. One write per pod under any backlog rests on two rules here:
//
//   - A write the cache does not show yet is waited for. Past the
//     expectation timeout it is overdue: the plan asks the API server
//     whether it took effect (decision.Input.Overdue, Plan.Confirm), and the
//     pod is decided on what the API server shows. If the write is in
//     effect, the cache only lags (a long queue of watch events, a relist
//     under load): nothing is written again, and the wait goes on
//     (absorbOverdue); a second write from the stale view would be doomed
//     (the CRR exists, the swap's test op fails). A write the API server
//     does not show either is decided afresh.
//   - A write refused as stale (its test op failed, a Conflict) was decided
//     on a view the API server had moved past. Deciding again on the same
//     view would send the same doomed write, with only the retry back-off
//     between them; so the pod waits until the cache shows a newer pod or
//     CRR (the watch event that brings it also queues the pod), at most the
//     expectation timeout.
func (r *Reconciler) awaitCache(logger klog.Logger, pod *corev1.Pod, mem *podMemory, now time.Time) (time.Duration, cacheGate, bool) {
	var g cacheGate
	if pending := mem.pendingWrites(); len(pending) > 0 {
		waited := mem.waitedFor(now)
		switch {
		case r.satisfied(pod, pending):
			g.caughtUp = true
		case waited < r.cfg.ExpectationTimeout:
			logger.V(4).Info("Waiting for the cache to show an earlier write", "pending", len(pending))
			return r.cfg.ExpectationTimeout - waited, g, false
		default:
			for _, e := range pending {
				g.overdue = append(g.overdue, e.action)
			}
		}
	}
	staleView, staleAt := mem.staleViewAt()
	if staleView == "" {
		return 0, g, true
	}
	if waited := now.Sub(staleAt); waited < r.cfg.ExpectationTimeout && r.view(pod) == staleView {
		logger.V(4).Info("Waiting for the cache to move past the view a stale write was decided on")
		return r.cfg.ExpectationTimeout - waited, g, false
	}
	g.staleGone = true
	return 0, g, true
}

// cacheGate is what awaitCache found, for absorb: the cache shows every
// pending write (caughtUp), or some are overdue; the cache moved past the
// view of a write refused as stale (staleGone).
type cacheGate struct {
	caughtUp, staleGone bool
	overdue             []decision.Action
}

// absorbGate tells the pod's memory what awaitCache found.
func absorbGate(mem *podMemory, g cacheGate) {
	if g.caughtUp {
		mem.cacheCaughtUp()
	}
	if g.staleGone {
		mem.staleViewGone()
	}
}

// view names the versions of what the decision read from the cache: the pod
// and its CRRs. It is empty when a version is missing (objects not from an
// API server), so that nothing is held on a view that cannot be told apart.
func (r *Reconciler) view(pod *corev1.Pod) string {
	if pod.ResourceVersion == "" {
		return ""
	}
	parts := []string{string(pod.UID) + "@" + pod.ResourceVersion}
	if r.read.CRRAPIAvailable() {
		crrs, err := r.read.CRRs(pod)
		if err != nil {
			return ""
		}
		for _, c := range crrs {
			if c.ResourceVersion == "" {
				return ""
			}
			parts = append(parts, c.Name+"@"+c.ResourceVersion)
		}
	}
	sort.Strings(parts[1:])
	return strings.Join(parts, " ")
}

// podShows reports whether the pod carries a swap's or a settle's effect.
func podShows(pod *corev1.Pod, a decision.Action) bool {
	switch a.Kind {
	case decision.ActionSwapImage:
		for _, s := range a.Swaps {
			if s.Index >= len(pod.Spec.Containers) || pod.Spec.Containers[s.Index].Image != s.To {
				return false
			}
		}
		return true
	case decision.ActionSettlePhase:
		return decision.HasSidecarTerminatedCondition(pod)
	case decision.ActionRecordAttempt:
		return decision.AttemptRecorded(pod, a.Stage, a.Attempt)
	case decision.ActionRecordAPIGone:
		return pod.Annotations[decision.AnnotationCRRAPIGone] != ""
	}
	return false
}

// requeueAfter is when to look at the pod again: the plan's own wait, or the
// expectation's timeout if a write is still unseen, whichever comes first,
// so a write whose effect never reaches the cache is revisited even when
// nothing else wakes the pod.
func (r *Reconciler) requeueAfter(mem *podMemory, planned time.Duration, now time.Time) time.Duration {
	if len(mem.pendingWrites()) == 0 {
		return planned
	}
	timeout := r.cfg.ExpectationTimeout - mem.waitedFor(now)
	if timeout <= 0 {
		timeout = time.Second
	}
	if planned == 0 || timeout < planned {
		return timeout
	}
	return planned
}

func describePending(pending []decision.Action) []string {
	out := make([]string, len(pending))
	for i, a := range pending {
		out[i] = string(a.Kind)
		if a.CRRName != "" {
			out[i] += " " + a.CRRName
		}
	}
	return out
}
