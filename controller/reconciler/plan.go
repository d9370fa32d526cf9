package reconciler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Plan gathers the decision's facts about the pod from the Reader and
// decides, without acting and without reading anything but the Reader's
// usual reads (the simulator's update filter calls it for every update).
func (r *Reconciler) Plan(pod *corev1.Pod, now time.Time) (decision.Plan, error) {
	in, err := r.observe(pod, r.memory(cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}, pod.UID), now)
	if err != nil {
		return decision.Plan{}, err
	}
	return decide(in), nil
}

// ExplainPlan is Plan for a person (`explain`): it also looks for
// OpenKruise's own SidecarTerminator's CRR whatever the signals say, and
// lists the pod's CRRs as kruise reports them.
func (r *Reconciler) ExplainPlan(pod *corev1.Pod, now time.Time) (decision.Plan, error) {
	in, err := r.observe(pod, r.memory(cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}, pod.UID), now)
	if err != nil {
		return decision.Plan{}, err
	}
	if in.CRRAPI && in.SecondTerminator == nil {
		if crr, err := r.live.KruiseTerminatorCRR(context.Background(), pod); err == nil && crr != nil {
			in.SecondTerminator = secondFacts(crr)
		}
	}
	plan := decide(in)
	if plan.NeedsJob != "" {
		// explain reads the Job as the controller would, to show the rule.
		if in.Job, err = readJob(context.Background(), r.live, pod, plan.NeedsJob); err != nil {
			return plan, err
		}
		plan = decide(in)
	}
	plan.CRRs = decision.CRRStates(in)
	plan.SecondTerminator = in.SecondTerminator
	return plan, nil
}

// input gathers the decision's facts from the Reader.
func (r *Reconciler) input(pod *corev1.Pod, now time.Time) (decision.Input, error) {
	in := decision.Input{Pod: pod, Now: now, Policy: r.cfg.Policy, CRRAPI: r.read.CRRAPIAvailable(),
		Node: decision.Node{Name: pod.Spec.NodeName}}
	if facts, ok := r.read.Node(pod.Spec.NodeName); ok {
		in.Node.Found = true
		in.Node.Virtual = r.cfg.VirtualNodeSelector != nil && r.cfg.VirtualNodeSelector.Matches(labels.Set(facts.Labels))
		in.Node.Platform, in.Node.PlatformWhy = decision.PlatformOf(facts, in.Node.Virtual)
		// A platform that can never run kruise-daemon waits for no sign
		// of one (its NodeImage grace).
		if in.Node.Capabilities().KruiseDaemon {
			in.Node.Daemon, in.Node.DaemonWhy = r.read.KruiseDaemon(pod.Spec.NodeName, now, r.cfg.KruiseDaemonGrace)
		}
	}
	in.CRRAPIGoneSince = r.crrAPIGoneSince(in.CRRAPI, now)
	in.CRRAPIServedAt = r.crrAPIServedAt()
	if in.CRRAPI {
		crrs, err := r.read.CRRs(pod)
		if err != nil {
			return in, fmt.Errorf("list CRRs of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		for _, c := range crrs {
			in.CRRs = append(in.CRRs, crrFacts(c))
		}
	}
	return in, nil
}

// observe is a sync's first step: the decision's input from the Reader's
// caches and what the reconciler remembers of the pod. It changes nothing
// (absorb remembers what it showed).
func (r *Reconciler) observe(pod *corev1.Pod, mem *podMemory, now time.Time) (decision.Input, error) {
	in, err := r.input(pod, now)
	if err != nil {
		return in, err
	}
	if mem.hasCRRs() {
		// Where the CRR API is no longer served (its CRD was removed while
		// the controller ran, which deletes every CRR), the remembered CRRs
		// are given all the same: kruise-daemon may still be stopping a
		// sidecar under one, and a swap must not land in that stop.
		in.CRRs = append(in.CRRs, mem.rememberedCRRs(in.CRRs)...)
	}
	in.Refusals = mem.refusals()
	in.RefusedCRRs = mem.refusedCRRList()
	in.SwappedAt = mem.swapTimes()
	in.SecondTerminator = mem.secondTerminator()
	in.SecondTerminatorAwaited = mem.lookedForSecondAny(awaited)
	in.SecondLooked = decision.SecondLook(mem.secondLooks())
	in.KruiseTerminatorSeen = r.kruiseSeen.Load()
	in.Job = mem.job()
	in.WatchedSince = mem.watchedSince()
	return in, nil
}
