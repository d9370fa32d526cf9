package sim

import (
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"

	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// The checker's rules for a cluster that says no (issue 15), beside the
// invariants of check.go.

// stopRequested checks a stop asked of a running container (a CRR picked up,
// an image change seen) before the model acts on it: a second stop of the
// same run of a sidecar within the grace period of the first lands while the
// first is under way (a CRR deadline shorter than the grace period counted
// it failed), whether or not it changes what the container does. The rule
// holds in every scenario: a stop kruise-daemon began just before its CRR's
// deadline is waited for (decision.stopUnderWay).
func (ch *Checker) stopRequested(e *podEntry, container, cause string) {
	c := e.rt.Container(container)
	if c == nil || c.State != model.Running || c.Image == QuickExitImage || e.truth.heldUp {
		// A sidecar swapped to the quick-exit image runs that image's
		// instant exit, no longer the sidecar's own work: a stop of it cuts
		// nothing short (two replicas acting during a leader change can
		// both stop it).
		// A StopOrderHeldUp Warning said the controller stops the later
		// stages with the held-up sidecars now, knowingly.
		return
	}
	now := ch.s.now()
	if k, ok := e.truth.killed[container]; ok && k.restarts == c.RestartCount && now.Before(k.at.Add(e.truth.grace)) {
		ch.violate("safety", e, "%s stops %q %s after an earlier stop, within its grace period of %s", cause, container, now.Sub(k.at), e.truth.grace)
	}
}

// crrCounted counts the CRRs created for a pod against the scenario's
// MaxCRRsPerPod: the attempts must not reset when kruise deletes CRRs.
func (ch *Checker) crrCounted(crr *kruisev1alpha1.ContainerRecreateRequest, e *podEntry) {
	if e.node.daemon == nil {
		ch.violate("safety", e, "CRR %s made for a pod on node %s (%s), where no kruise-daemon runs: it can only wait for its deadline", crr.Name, e.node.name, e.node.platform)
		return
	}
	e.truth.crrs++
	if max := ch.s.sc.MaxCRRsPerPod; max > 0 && e.truth.crrs > max {
		ch.violate("safety", e, "CRR %s is the pod's CRR number %d, past the %d attempts: the count was reset", crr.Name, e.truth.crrs, max)
	}
}
