package sim

import (
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// The checker's rules for the controller's writes (a CRR, an image patch, a
// status patch), beside the invariants of check.go.

// crrCreated checks a CRR the controller created: never for a pod it must
// ignore, never naming a main container, and never while another of the
// pod's CRRs is in flight (not finished, its deadline not passed).
// kruise-daemon works on one CRR of a pod at a time, the Recreating one and
// then the oldest (pickRecreateRequest in
// pkg/daemon/containerrecreate/crr_daemon_controller.go, kruise v1.9.1),
// while kruise-manager counts each CRR's activeDeadlineSeconds from its
// creation (pkg/controller/containerrecreaterequest/crr_controller.go): a
// second CRR waits, its deadline running, and the write is wasted.
func (ch *Checker) crrCreated(crr *kruisev1alpha1.ContainerRecreateRequest, e *podEntry) {
	if isKruiseTerminatorCRR(crr) {
		return
	}
	if e.truth.expect == ExpectIgnored || e.truth.allNative() {
		ch.violate("safety", e, "CRR %s created for a pod the controller must ignore", crr.Name)
		return
	}
	for _, c := range crr.Spec.Containers {
		if !e.truth.sidecars[c.Name] {
			ch.violate("safety", e, "CRR %s names main container %q", crr.Name, c.Name)
			return
		}
	}
	now := ch.s.now()
	for _, key := range ch.s.world.crrsOf[crrPodUID(crr)] {
		other := ch.s.world.crrs[key]
		if other == nil || other.Name == crr.Name || crrFinished(other) || isKruiseTerminatorCRR(other) {
			// OpenKruise's own terminator's CRR is not ours: besideKruise
			// judges a CRR made beside it.
			continue
		}
		if d := other.Spec.ActiveDeadlineSeconds; d == nil || now.Before(other.CreationTimestamp.Add(time.Duration(*d)*time.Second)) {
			ch.violate("safety", e, "CRR %s created while CRR %s is still in flight", crr.Name, other.Name)
			return
		}
	}
}

func (ch *Checker) podPatched(e *podEntry, old *corev1.Pod) {
	if e.truth.expect == ExpectIgnored || e.truth.allNative() {
		ch.violate("safety", e, "pod patched although the controller must ignore it")
		return
	}
	for i, c := range e.obj.Spec.Containers {
		if c.Image != old.Spec.Containers[i].Image && !e.truth.sidecars[c.Name] {
			ch.violate("safety", e, "image of main container %q changed to %s", c.Name, c.Image)
			return
		}
	}
	if why := mainsActive(e); why != "" {
		ch.violate("safety", e, "sidecar image swapped while %s", why)
	}
}

func (ch *Checker) statusPatched(e *podEntry, old *corev1.Pod) {
	if e.truth.expect == ExpectIgnored || e.truth.allNative() {
		ch.violate("safety", e, "pod status patched although the controller must ignore it")
		return
	}
	if why := mainsActive(e); why != "" {
		ch.violate("safety", e, "phase settled to %s while %s", e.obj.Status.Phase, why)
		return
	}
	n := 0
	for _, c := range e.obj.Status.Conditions {
		if c.Type == decision.ConditionSidecarTerminated {
			n++
		}
	}
	if n > 1 {
		ch.violate("safety", e, "the settle left %d %s conditions; a re-settle must replace ours", n, decision.ConditionSidecarTerminated)
		return
	}
	e.truth.settledAt = ch.s.now()
	if e.obj.Status.Phase == corev1.PodSucceeded {
		for _, name := range e.truth.mains {
			if c := e.rt.Container(name); c.ExitCode != 0 {
				ch.violate("safety", e, "phase settled to Succeeded although main %q exited %d", name, c.ExitCode)
			}
		}
	}
}

// allNative: every sidecar of the pod became a native sidecar at admission,
// so the kubelet stops them all and the controller has nothing to write.
func (tr *truth) allNative() bool { return len(tr.native) > 0 && len(tr.sidecars) == 0 }
