package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
//     its attempt (decision.AnnotationCRRAttempts is written before a retry's
//     CRR is created): after a restart, or a create that timed out but was
//     applied. The decision reads such an attempt as deleted since, a failed
//     kill, and would make the next attempt beside it. So before a plan makes
//     attempt n > 1 with no attempt n-1 known, that CRR is read from the API
//     server (one GET, on the retry path only) and, if it exists, remembered.

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

// madeCRR remembers a CRR this controller made (or found made: an own CRR
// under the name, a create applied although it got no answer), as sent and
// created now, unless a copy was seen already. The cache may never show it
// (a policy stripped the label the informer lists by) or may show it only
// after it is gone (deleted with its CRD while the cache lagged); either way
// kruise-daemon may be stopping its containers, and the decision must know.
// The answer's time is no earlier than the API server's creation time, so
// the deadline counted from it is no earlier than kruise-manager's.
func (m *podMemory) madeCRR(crr *kruisev1alpha1.ContainerRecreateRequest, at time.Time) {
	if _, ok := m.crrs[crr.Name]; ok {
		return
	}
	made := crr.DeepCopy()
	made.CreationTimestamp = metav1.NewTime(at)
	m.seeCRR(crrFacts(made))
}

func (m *podMemory) seeCRR(c decision.CRR) {
	if m.crrs == nil {
		m.crrs = map[string]decision.CRR{}
	}
	m.crrs[c.Name] = c
}

// crrDeleted records that this controller deleted the CRR (or may have: the
// request got no answer). A deleted CRR is finished for the decision.
func (m *podMemory) crrDeleted(name string, at time.Time) {
	if m.deletedCRRs == nil {
		m.deletedCRRs = map[string]time.Time{}
	}
	m.deletedCRRs[name] = at
}

// crrRefused records a CRR create of this controller that was refused.
func (m *podMemory) crrRefused(a decision.Action) {
	if m.refusedCRRs == nil {
		m.refusedCRRs = map[string]decision.Action{}
	}
	m.refusedCRRs[a.CRRName] = a
}

// rememberedCRRs are the remembered CRRs the cache does not show: as last
// seen, or finished when this controller deleted them. A CRR the cache
// shows is the cache's (newer) copy, even one deleted and made again.
func rememberedCRRs(mem *podMemory, cached []*kruisev1alpha1.ContainerRecreateRequest) []decision.CRR {
	var out []decision.CRR
	for _, name := range slices.Sorted(maps.Keys(mem.crrs)) {
		seen := false
		for _, k := range cached {
			seen = seen || k.Name == name
		}
		if seen {
			continue
		}
		c := mem.crrs[name]
		c.Unseen = true
		if at, ok := mem.deletedCRRs[name]; ok && !c.Finished() {
			c.Phase, c.Completed, c.Message = "Completed", at, "deleted by this controller"
		}
		out = append(out, c)
	}
	return out
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
// of otherwise.
func (r *Reconciler) seeUnseenCRR(ctx context.Context, pod *corev1.Pod, mem *podMemory, plan decision.Plan) (bool, error) {
	live, ok := r.write.(LiveChecker)
	if !ok {
		return false, nil
	}
	for _, a := range plan.Actions {
		if a.Kind != decision.ActionCreateCRR {
			continue
		}
		if a.Attempt >= 2 {
			name := decision.StageCRRName(pod, a.Stage, a.Attempt-1)
			if _, known := mem.crrs[name]; !known {
				prev := a
				prev.Attempt, prev.CRRName = a.Attempt-1, name
				if found, err := r.seeLiveCRR(ctx, live, pod, mem, prev, time.Time{}); found || err != nil {
					return found, err
				}
			}
		}
		for _, name := range r.deletedEarlierStages(pod, mem, a.Stage) {
			c := mem.crrs[name]
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
	if stage == 0 || len(mem.refusedCRRs) == 0 || !r.read.CRRAPIAvailable() {
		return nil
	}
	var out []decision.Action
	for _, name := range slices.Sorted(maps.Keys(mem.refusedCRRs)) {
		a := mem.refusedCRRs[name]
		if _, known := mem.crrs[name]; known || a.Stage >= stage {
			continue
		}
		out = append(out, a)
	}
	return out
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
	delete(mem.deletedCRRs, a.CRRName)
	mem.seeCRR(crrFacts(crr))
	return true, nil
}

// deletedEarlierStages names the CRRs of stages before stage that this
// controller deleted and its cache does not show.
func (r *Reconciler) deletedEarlierStages(pod *corev1.Pod, mem *podMemory, stage int) []string {
	if stage == 0 || len(mem.deletedCRRs) == 0 || !r.read.CRRAPIAvailable() {
		return nil
	}
	cached, err := r.read.CRRs(pod)
	if err != nil {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(mem.crrs)) {
		_, deleted := mem.deletedCRRs[name]
		if c := mem.crrs[name]; !deleted || c.Stage >= stage {
			continue
		}
		shown := false
		for _, k := range cached {
			shown = shown || k.Name == name
		}
		if !shown {
			out = append(out, name)
		}
	}
	return out
}
