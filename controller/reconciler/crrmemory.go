package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// A pod has one of our CRRs in flight at a time: kruise-daemon works on one
// of a pod's CRRs at a time while kruise-manager counts each one's deadline
// from its creation (github.com/openkruise/kruise v1.9.1,
// pkg/daemon/containerrecreate/crr_daemon_controller.go pickRecreateRequest;
// pkg/controller/containerrecreaterequest/crr_controller.go), so a second
// one waits and spends its deadline waiting. The decision keeps to that rule
// with the CRRs it is given; this file keeps the cache from hiding one.
//
// The pod and CRR informers are separate watches, so the cache can show a
// pod that is older than its CRRs, or newer. Two views lose a CRR:
//
//   - A CRR gone from the cache: deleted by this controller when its stop-order
//     stage was over, by kruise after it finished, or by another replica. A
//     view with the pod older than that deletion shows the CRR's sidecars
//     running and no CRR for them, and would make the stage's CRR again.
//     So the pod's CRRs are remembered as last seen, and one this controller
//     deleted as finished; the decision is given the remembered ones the
//     cache no longer shows.
//   - A CRR not yet in the cache, while the pod's annotation already records
//     its attempt (decision.AnnotationCRRAttempts, written after a retry's
//     CRR was created, or another replica's): after a restart, or a create
//     that timed out but was applied. The decision counts such an attempt's
//     window from the time the record holds; before a plan makes attempt
//     n > 1 with no attempt n-1 known, that CRR is read from the API server
//     (one GET, on the retry path only) and, if it exists, remembered.

// createdAfterAll reports whether a CRR create that got no answer (a timeout,
// a broken connection) was applied all the same: the API server is asked (one
// GET, only after such a failure). Counted as not made, the next view, whose
// cache may not show the CRR yet, would go on to the next stage's CRR beside
// it; counted as made, the write's expectation waits for the cache to show it.
func (r *Reconciler) createdAfterAll(ctx context.Context, pod *corev1.Pod, a decision.Action, err error) bool {
	live, ok := r.write.(LiveChecker)
	if foreign := (*ForeignCRRError)(nil); !ok || a.Kind != decision.ActionCreateCRR || errors.As(err, &foreign) || !noAnswer(err) {
		return false
	}
	crr, lerr := live.LiveCRR(ctx, pod.Namespace, a.CRRName)
	return lerr == nil && CheckExistingCRR(crr, r.newCRR(pod, a)) == nil
}

// noteCRRs remembers the pod's CRRs as the cache shows them now. Only Sync
// calls it: Plan and ExplainPlan read the memory without changing it.
func (r *Reconciler) noteCRRs(pod *corev1.Pod, mem *podMemory) error {
	if !r.read.CRRAPIAvailable() {
		return nil
	}
	crrs, err := r.read.CRRs(pod)
	if err != nil {
		return fmt.Errorf("list CRRs of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for _, c := range crrs {
		mem.seeCRR(crrFacts(c))
	}
	return nil
}

// seeUnseenCRR reports whether it found, and remembered, a CRR in the way of
// one the plan creates, which the decision was not given: the previous
// attempt (see above), or an earlier stop-order stage's CRR that this
// controller deleted and another replica made again since. The second: while
// leadership moves, two replicas write for a moment; one deletes an earlier
// stage's CRR to go on to the next stage, and the other, whose cache shows
// that CRR gone and the stage's sidecars running, makes it again under the
// same name. Taken for the one deleted, it would not be deleted before the
// next stage's CRR is made beside it. Likewise an earlier stage's CRR whose
// create this controller was refused (a webhook's 403, a timeout) and another
// replica made since (soak seed 403): its sidecars stop, the stage looks
// over, and with the CRR not yet in the cache the next stage's would be made
// beside it. One GET per name, only when a stage's CRR is created after this
// controller deleted, or was refused, an earlier one that it does not know
// of otherwise. And an earlier stage's CRR that the pod's stop-stage mark
// says may exist (decision.EarlierStageCRRs): another replica wrote the mark
// and made the CRR, and this replica's pod informer brought the one before
// its CRR informer brought the other (soak seed 140). And the next stage's
// CRR (decision.LaterStageCRR), which another replica made after it found
// this stage held up and deleted its CRR, while this replica's caches show
// neither (soak seed 313): one GET before each stage's CRR but the last's,
// on the happy path too (stopwindow_test.go says why it stays), and from the
// third stage on one more of the stage this replica deleted.
func (r *Reconciler) seeUnseenCRR(ctx context.Context, pod *corev1.Pod, mem *podMemory, plan decision.Plan) (bool, error) {
	live, ok := r.write.(LiveChecker)
	if !ok {
		return false, nil
	}
	for _, a := range plan.Actions {
		if a.Kind == decision.ActionSwapImage {
			// A swap that follows a refused create of this stage (or an
			// earlier one): another replica may have made that CRR since,
			// which this cache does not show yet (soak seed 460). Its
			// kruise-daemon kill is under way, and a swap now would stop
			// the sidecar a second time within its grace period.
			for _, refused := range r.refusedEarlierStages(mem, a.Stage+1) {
				if found, err := r.seeLiveCRR(ctx, live, pod, mem, refused, time.Time{}); found || err != nil {
					return found, err
				}
			}
			continue
		}
		if a.Kind != decision.ActionCreateCRR {
			continue
		}
		if a.Attempt >= 2 {
			name := decision.StageCRRName(pod, a.Stage, a.Attempt-1)
			prev := a
			prev.Attempt, prev.CRRName = a.Attempt-1, name
			switch {
			case !mem.knowsCRR(name):
				if found, err := r.seeLiveCRR(ctx, live, pod, mem, prev, time.Time{}); found || err != nil {
					return found, err
				}
			case !r.cacheShows(pod, name):
				// Known from memory only (our label stripped, or deleted
				// after it finished): another replica, whose view had no
				// such CRR and no attempt count, may have made the first
				// attempt again under the name (soak seed 1061). One made
				// after the remembered one is in flight: no second beside it.
				if found, err := r.seeLiveCRR(ctx, live, pod, mem, prev, mem.crr(name).Created); found || err != nil {
					return found, err
				}
			}
		}
		for _, earlier := range decision.EarlierStageCRRs(pod, a.Stage) {
			if !r.read.CRRAPIAvailable() || mem.knowsCRR(earlier.CRRName) {
				continue
			}
			if found, err := r.seeLiveCRR(ctx, live, pod, mem, earlier, time.Time{}); found || err != nil {
				return found, err
			}
		}
		if later, ok := decision.LaterStageCRR(pod, a.Stage); ok && r.read.CRRAPIAvailable() && !mem.knowsCRR(later.CRRName) {
			if found, err := r.seeLiveCRR(ctx, live, pod, mem, later, time.Time{}); found || err != nil {
				return found, err
			}
		}
		for _, name := range r.deletedEarlierStages(pod, mem, a.Stage) {
			c := mem.crr(name)
			earlier := decision.Action{Kind: decision.ActionCreateCRR, CRRName: name, Attempt: c.Attempt, Stage: c.Stage, Containers: c.Containers}
			if found, err := r.seeLiveCRR(ctx, live, pod, mem, earlier, c.Created); found || err != nil {
				return found, err
			}
		}
		for _, earlier := range r.refusedEarlierStages(mem, a.Stage) {
			if found, err := r.seeLiveCRR(ctx, live, pod, mem, earlier, time.Time{}); found || err != nil {
				return found, err
			}
		}
	}
	return false, nil
}

// refusedEarlierStages are the creates of stages before stage that this
// controller was refused and whose CRRs it knows of no other way.
func (r *Reconciler) refusedEarlierStages(mem *podMemory, stage int) []decision.Action {
	if stage == 0 || !mem.hasRefusedCRRs() || !r.read.CRRAPIAvailable() {
		return nil
	}
	return mem.refusedEarlierStages(stage)
}

// seeLiveCRR reads the action's CRR from the API server and remembers it if
// it exists, is ours (even with our managed-by label stripped by a policy:
// kruise works on it all the same; anyone else's under the name is not taken
// for ours, CheckExistingCRR), is not being deleted, and was created after
// madeAfter (zero: any time).
func (r *Reconciler) seeLiveCRR(ctx context.Context, live LiveChecker, pod *corev1.Pod, mem *podMemory, a decision.Action, madeAfter time.Time) (bool, error) {
	crr, err := live.LiveCRR(ctx, pod.Namespace, a.CRRName)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read CRR %s/%s live before making another: %w", pod.Namespace, a.CRRName, err)
	case CheckExistingCRR(crr, r.newCRR(pod, a)) != nil, crr.DeletionTimestamp != nil, !madeAfter.IsZero() && !crr.CreationTimestamp.Time.After(madeAfter):
		return false, nil
	}
	mem.liveCRRSeen(crrFacts(crr))
	return true, nil
}

// deletedEarlierStages names the CRRs of stages before stage that this
// controller deleted and its cache does not show.
func (r *Reconciler) deletedEarlierStages(pod *corev1.Pod, mem *podMemory, stage int) []string {
	if stage == 0 || !mem.hasDeletedCRRs() || !r.read.CRRAPIAvailable() {
		return nil
	}
	var out []string
	for _, name := range mem.deletedEarlierStages(stage) {
		if !r.cacheShows(pod, name) {
			out = append(out, name)
		}
	}
	return out
}

// cacheShows reports whether the cache lists the pod's CRR of that name.
func (r *Reconciler) cacheShows(pod *corev1.Pod, name string) bool {
	if !r.read.CRRAPIAvailable() {
		return false
	}
	cached, err := r.read.CRRs(pod)
	if err != nil {
		return false
	}
	for _, c := range cached {
		if c.Name == name {
			return true
		}
	}
	return false
}
