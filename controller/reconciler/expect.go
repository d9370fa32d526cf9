package reconciler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// LiveChecker is a Writer that can also read the API server directly. The
// reconciler asks it only when the cache has not shown a write's effect
// within the expectation timeout, or once per stale write: the few reads
// that keep a lagging cache from being answered with a second write.
type LiveChecker interface {
	// LivePod reads the pod from the API server.
	LivePod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// LiveCRR reads the named CRR from the API server; an error for which
	// apierrors.IsNotFound is true when there is none.
	LiveCRR(ctx context.Context, namespace, name string) (*kruisev1alpha1.ContainerRecreateRequest, error)
}

// awaitCache says whether the pod may be decided now, and if not, when to
// look again. One write per pod under any backlog rests on two rules here:
//
//   - A write the cache does not show yet is waited for. Past the
//     expectation timeout the API server is asked whether the write took
//     effect: if it did, the cache only lags (a long queue of watch events,
//     a relist under load) and the wait goes on; a second write from that
//     stale view would be doomed (the CRR exists, the swap's test op fails).
//     Only a write the API server does not show either is decided afresh.
//   - A write refused as stale (its test op failed, a Conflict) was decided
//     on a view the API server had moved past. Deciding again on the same
//     view would send the same doomed write, with only the retry back-off
//     between them; so the pod waits until the cache shows a newer pod or
//     CRR (the watch event that brings it also queues the pod), at most the
//     expectation timeout.
func (r *Reconciler) awaitCache(ctx context.Context, logger klog.Logger, pod *corev1.Pod, mem *podMemory, now time.Time) (time.Duration, bool, error) {
	if pending := mem.pendingWrites(); len(pending) > 0 {
		waited := mem.waitedFor(now)
		switch {
		case r.satisfied(pod, pending):
			mem.cacheCaughtUp()
		case waited < r.cfg.ExpectationTimeout:
			logger.V(4).Info("Waiting for the cache to show an earlier write", "pending", len(pending))
			return r.cfg.ExpectationTimeout - waited, false, nil
		default:
			applied, err := r.appliedLive(ctx, pod, mem, pending)
			if err != nil {
				return 0, false, fmt.Errorf("check pod %s/%s's unseen writes live: %w", pod.Namespace, pod.Name, err)
			}
			if applied {
				logger.Info("The cache lags: an earlier write is in effect at the API server but not yet in the cache; waiting for it rather than writing again",
					"pending", describePending(pending), "after", waited.String())
				mem.stillUnseen(now)
				return r.cfg.ExpectationTimeout, false, nil
			}
			// The write's effect never showed up (a policy engine stripped
			// the CRR's label, the write was undone): decide afresh, and
			// say so, since it means the cache and the cluster disagree.
			r.metrics.ExpectationsTimedOut.Inc()
			logger.Info("Expectation timed out: deciding afresh", "pending", describePending(pending), "after", waited.String())
			mem.cacheCaughtUp()
		}
	}
	staleView, staleAt := mem.staleViewAt()
	if staleView == "" {
		return 0, true, nil
	}
	if waited := now.Sub(staleAt); waited < r.cfg.ExpectationTimeout && r.view(pod) == staleView {
		logger.V(4).Info("Waiting for the cache to move past the view a stale write was decided on")
		return r.cfg.ExpectationTimeout - waited, false, nil
	}
	mem.staleViewGone()
	return 0, true, nil
}

// staleWrite remembers the view a write refused as stale was decided on.
func (r *Reconciler) staleWrite(pod *corev1.Pod, mem *podMemory, now time.Time) {
	mem.staleOn(r.view(pod), now)
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

// appliedLive reports whether the API server shows the effect of every
// pending write in a way the cache will show too. Without a LiveChecker it
// cannot tell, and says no. An own CRR the informer never lists (a policy
// stripped our label) is remembered as read, and is no write to wait for.
func (r *Reconciler) appliedLive(ctx context.Context, pod *corev1.Pod, mem *podMemory, pending []expectation) (bool, error) {
	live, ok := r.write.(LiveChecker)
	if !ok {
		return false, nil
	}
	var livePod *corev1.Pod
	for _, e := range pending {
		switch e.action.Kind {
		case decision.ActionCreateCRR:
			crr, err := live.LiveCRR(ctx, pod.Namespace, e.action.CRRName)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			// Ours, as made: then the informer, which lists only CRRs with
			// our label, will show it. Anyone else's the cache never shows:
			// decide afresh, and the create meets it (CheckExistingCRR).
			// Ours with the label stripped it never shows either: remembered
			// as read now, the decision follows it through (its deadline, a
			// stop under way) without the cache.
			if CheckExistingCRR(crr, r.newCRR(pod, e.action)) != nil {
				return false, nil
			}
			if unlisted(crr) {
				mem.seeCRR(crrFacts(crr))
				return false, nil
			}
		case decision.ActionDeleteCRR:
			_, err := live.LiveCRR(ctx, pod.Namespace, e.action.CRRName)
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		case decision.ActionSwapImage, decision.ActionSettlePhase, decision.ActionRecordAttempt, decision.ActionRecordAPIGone:
			if livePod == nil {
				p, err := live.LivePod(ctx, pod.Namespace, pod.Name)
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				if err != nil {
					return false, err
				}
				if p.UID != pod.UID {
					return false, nil
				}
				livePod = p
			}
			if !podShows(livePod, e.action) {
				return false, nil
			}
		}
	}
	return true, nil
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

func describePending(pending []expectation) []string {
	out := make([]string, len(pending))
	for i, e := range pending {
		out[i] = string(e.action.Kind)
		if e.action.CRRName != "" {
			out[i] += " " + e.action.CRRName
		}
	}
	return out
}
