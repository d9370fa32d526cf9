package sim

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// dropPodUpdate is the controller's pre-enqueue filter (kube.Controller's
// update handler) on one delivered pod update: true when the key is not
// queued. Each dropped update is proved harmless as it happens: the decision
// is taken on both sides, with everything else the same (the cache's node
// and CRRs, the reconciler's memory of the pod, now); plans that differ are a
// violation. With Options.NoUpdateFilter nothing is dropped, for comparison.
func (c *controller) dropPodUpdate(key cache.ObjectName, held, stored *corev1.Pod) bool {
	if held == nil {
		return c.dropPodAdd(stored)
	}
	if c.s.opts.NoUpdateFilter {
		return false
	}
	if reconciler.PodUpdateMatters(held, stored) {
		return c.dropOwnEcho(held, stored)
	}
	c.s.stats.filtered++
	before, err1 := c.rec.Plan(held, c.s.now())
	after, err2 := c.rec.Plan(stored, c.s.now())
	if before.Verdict == decision.VerdictIgnored && after.Verdict == decision.VerdictIgnored {
		// Ignored either way: the sync forgets the pod and does nothing
		// else; the reason's words and explain's CRR lines may differ.
		before, after = decision.Plan{Verdict: before.Verdict}, decision.Plan{Verdict: after.Verdict}
	} else if before.DoesNothing() && after.DoesNothing() {
		// Unmarked on both sides (decision.Considered), or unmarked on one
		// and ignored on the other: nothing to write or warn of either way.
		before, after = decision.Plan{}, decision.Plan{}
	}
	if diff := cmp.Diff(before, after); err1 != nil || err2 != nil || diff != "" {
		msg := fmt.Sprintf("pod update rv %s -> %s dropped before the queue, but the decision differs (-old +new):\n%s%v%v",
			held.ResourceVersion, stored.ResourceVersion, diff, err1, err2)
		if e := c.s.world.byUID[stored.UID]; e != nil {
			c.s.check.violate("safety", e, "%s", msg)
		} else {
			c.s.check.runaway("%s: %s", key, msg)
		}
	}
	return true
}

// dropOwnEcho is the reconciler's part of the pod handler's filter
// (Reconciler.PodUpdateMatters): the echo of its own swap, and a pod's own
// end, which it forgets. The echo is checked as it is dropped: the plan on
// the new version, with the reconciler's memory, writes nothing (the write's
// sync already made what it shows). A pod that Succeeded by itself is not
// eligible, so its decision is VerdictIgnored by construction.
func (c *controller) dropOwnEcho(held, stored *corev1.Pod) bool {
	if c.rec.PodUpdateMatters(held, stored) {
		return false
	}
	c.s.stats.filtered++
	if decision.Eligible(stored) {
		c.mustWriteNothing(stored, "the echo of its own swap")
	}
	return true
}

// mustWriteNothing checks an event dropped as the echo of the reconciler's
// own write: the plan on the pod as the cache now holds it has no action.
func (c *controller) mustWriteNothing(pod *corev1.Pod, what string) {
	plan, err := c.rec.Plan(pod, c.s.now())
	if err != nil || len(plan.Actions) > 0 {
		msg := fmt.Sprintf("%s/%s: %s dropped before the queue, but its plan writes %v (%v)", pod.Namespace, pod.Name, what, plan.Actions, err)
		if e := c.s.world.byUID[pod.UID]; e != nil {
			c.s.check.violate("safety", e, "%s", msg)
		} else {
			c.s.check.runaway("%s", msg)
		}
	}
}

// dropCRREvent is the same filter on a CRR event, as kube.Controller's CRR
// handlers apply it: an update that changes nothing the decision reads of a
// CRR (crrFacts, so the decision on both sides is the same by construction),
// or any event while the cache's pod is one the decision does not consider
// (decision.Considered), which is checked: its plan must do nothing.
func (c *controller) dropCRREvent(podKey cache.ObjectName, held, stored *kruisev1alpha1.ContainerRecreateRequest, deleted bool) bool {
	if c.s.opts.NoUpdateFilter {
		return false
	}
	if pod := c.cache.pods[podKey]; !reconciler.CRREventMatters(pod) {
		c.s.stats.filtered++
		if pod != nil {
			c.mustBeIgnored(pod, "CRR event")
		}
		return true
	}
	if held == nil && !deleted && !c.rec.CRRAddMatters(stored) {
		// The add of the CRR the reconciler just made (Reconciler.CRRAddMatters).
		c.s.stats.filtered++
		c.mustWriteNothing(c.cache.pods[podKey], "the add of its own CRR")
		return true
	}
	if deleted || reconciler.CRRUpdateMatters(held, stored) {
		return false
	}
	c.s.stats.filtered++
	return true
}

// dropPodAdd is the filter on a pod the informer adds: one the decision
// does not consider is not queued (checked: its plan does nothing).
func (c *controller) dropPodAdd(pod *corev1.Pod) bool {
	if c.s.opts.NoUpdateFilter || pod == nil || reconciler.PodAddMatters(pod) {
		return false
	}
	c.s.stats.filtered++
	c.mustBeIgnored(pod, "pod add")
	return true
}

func (c *controller) mustBeIgnored(pod *corev1.Pod, what string) {
	// Ignored (its Warning, if any, raised by the update that finished it),
	// or unmarked with nothing to write or warn of.
	if plan, err := c.rec.Plan(pod, c.s.now()); err != nil || (plan.Verdict != decision.VerdictIgnored && !plan.DoesNothing()) {
		c.s.check.runaway("%s/%s: %s dropped for a pod the filter takes as not considered, but its plan is %s with %d actions and %d problems (%v)",
			pod.Namespace, pod.Name, what, plan.Verdict, len(plan.Actions), len(plan.Problems), err)
	}
}
