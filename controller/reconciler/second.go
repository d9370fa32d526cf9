package reconciler

import (
	"context"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// SecondTerminatorReader reads the CRR OpenKruise's own SidecarTerminator
// makes for a pod (decision/second.go), from the API server: the
// controller's informer lists only its own CRRs. It is one of the live
// reads (LiveReader), made only where the plan asks for it
// (decision.Confirm.SecondTerminator), never on the happy path.
type SecondTerminatorReader interface {
	// KruiseTerminatorCRR returns the CRR named
	// decision.KruiseTerminatorCRRName(pod) in the pod's namespace if the
	// pod owns it, or nil when there is none.
	KruiseTerminatorCRR(ctx context.Context, pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error)
}

// awaited is the pod's memory that a first CRR of the pod waited for
// kruise's CRR (decision.Input.SecondTerminatorAwaited), kept beside the
// looks made (decision.SecondLook), above their bits.
const awaited = 1 << 16

func secondFacts(c *kruisev1alpha1.ContainerRecreateRequest) *decision.SecondTerminator {
	st := &decision.SecondTerminator{CRR: c.Name, Phase: string(c.Status.Phase), Created: c.CreationTimestamp.Time}
	for _, ctr := range c.Spec.Containers {
		st.Containers = append(st.Containers, ctr.Name)
	}
	return st
}

// noteSecondTerminator makes a second terminator seen on a pod visible
// beyond its Warning event: once per pod a log line and the metric, and,
// the first time in this process, a log line for the cluster, from which
// on every pod's first CRR looks for kruise's first.
func (r *Reconciler) noteSecondTerminator(logger klog.Logger, mem *podMemory, plan decision.Plan) {
	if mem.secondWasNoted() {
		return
	}
	var msg string
	for _, p := range plan.Problems {
		if p.Reason == decision.ReasonSecondTerminator {
			msg = p.Message
		}
	}
	if msg == "" {
		return
	}
	mem.noteSecond()
	r.metrics.SecondTerminatorPods.Inc()
	crr := ""
	if st := mem.secondTerminator(); st != nil {
		crr = st.CRR
	}
	logger.Info("OpenKruise's SidecarTerminator also acts on this pod; sidecar-terminator yields to it", "kruiseCRR", crr)
	if r.kruiseSeen.CompareAndSwap(false, true) {
		logger.Info(fmt.Sprintf("OpenKruise's SidecarTerminator acts in this cluster: from now on each pod's first ContainerRecreateRequest waits %s for its CRR and makes none for the containers that names; turn off its feature gate to run one terminator",
			decision.SecondTerminatorGrace))
	}
}

// KruiseTerminatorSeen records that OpenKruise's SidecarTerminator was seen
// acting in the cluster (at start-up, from its events): from now on each
// pod's first CRR looks for its CRR first. It reports whether this is news.
func (r *Reconciler) KruiseTerminatorSeen() bool {
	return r.kruiseSeen.CompareAndSwap(false, true)
}
