package reconciler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Plan gathers the decision's facts about the pod from the Reader and decides,
// without acting, for `explain` (Sync decides through plan).
func (r *Reconciler) Plan(pod *corev1.Pod, now time.Time) (decision.Plan, error) {
	mem := r.memory(cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}, pod.UID)
	in, err := r.memoryInput(pod, mem, now)
	if err != nil {
		return decision.Plan{}, err
	}
	plan := decision.Decide(in)
	// explain looks for a second terminator whatever the signals say.
	if in2, ok := r.lookForSecondTerminator(pod, mem, in, plan, true); ok {
		in, plan = in2, decision.WithSecondTerminator(decision.Decide(in2), in2)
	}
	// For a person only (explain): the sync loop does not need them.
	plan.CRRs = decision.CRRStates(in)
	plan.SecondTerminator = in.SecondTerminator
	return plan, nil
}

// memoryInput is input with what the reconciler remembers of the pod.
func (r *Reconciler) memoryInput(pod *corev1.Pod, mem *podMemory, now time.Time) (decision.Input, error) {
	in, err := r.input(pod, now)
	if err != nil {
		return in, err
	}
	in.Refusals = mem.refusals()
	in.SwappedAt = mem.swappedAt
	in.SecondTerminator = mem.second
	in.KruiseTerminatorSeen = r.kruiseSeen.Load()
	return in, nil
}
