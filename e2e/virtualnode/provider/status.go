package provider

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// ownedConditions are the pod conditions a kubelet sets; any other condition
// (PodScheduled from the scheduler, SidecarTerminated from the controller)
// is kept as the API had it, as the kubelet's status manager does.
var ownedConditions = map[corev1.PodConditionType]bool{
	corev1.PodReadyToStartContainers: true,
	corev1.PodInitialized:            true,
	corev1.ContainersReady:           true,
	corev1.PodReady:                  true,
	corev1.AllContainersRestarting:   true,
}

// podWithStatus is a deep copy of the pod carrying the model's status plus
// what a kubelet adds: host IP, start time, QoS class and conditions.
// Callers hold p.mu.
func (p *Provider) podWithStatus(e *entry, now time.Time) *corev1.Pod {
	pod := e.pod.DeepCopy()
	st := e.rt.Status()
	st.HostIP = p.cfg.NodeIP
	if p.cfg.NodeIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: p.cfg.NodeIP}}
	}
	started := e.started
	st.StartTime = &started
	st.QOSClass = e.pod.Status.QOSClass
	e.conds = conditions(e.conds, e.rt, st.Phase, now)
	for _, c := range e.pod.Status.Conditions {
		if !ownedConditions[c.Type] {
			st.Conditions = append(st.Conditions, c)
		}
	}
	st.Conditions = append(st.Conditions, e.conds...)
	pod.Status = st
	return pod
}

// conditions computes the kubelet-owned conditions, keeping the transition
// time of each one whose status did not change.
func conditions(prev []corev1.PodCondition, rt *model.Pod, phase corev1.PodPhase, now time.Time) []corev1.PodCondition {
	ready, reason := containersReady(rt, phase)
	want := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue},
		cond(corev1.PodInitialized, initialized(rt), "ContainersNotInitialized"),
		cond(corev1.ContainersReady, ready, reason),
		cond(corev1.PodReady, ready, reason),
		restartingCond(rt, phase),
	}
	for i := range want {
		want[i].LastTransitionTime = metav1.NewTime(now)
		for _, old := range prev {
			if old.Type == want[i].Type && old.Status == want[i].Status {
				want[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	return want
}

// restartingCond is the kubelet's AllContainersRestarting condition
// (KEP-5532; k8s.io/kubernetes v1.37.2 pkg/kubelet/status/generate.go
// GenerateAllContainersRestartingCondition): True while the model restarts
// every container in place, False otherwise, with the terminal phases'
// reasons.
func restartingCond(rt *model.Pod, phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.AllContainersRestarting, Status: corev1.ConditionFalse}
	switch {
	case phase == corev1.PodSucceeded:
		c.Reason = "PodCompleted"
	case phase == corev1.PodFailed:
		c.Reason = "PodFailed"
	case rt.RestartingAll():
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, "RestartAllContainersStarted", "container exited with restart policy rule"
	}
	return c
}

func cond(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
	if ok {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
	}
	return corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason}
}

// initialized: every init container finished with 0 and every native
// sidecar has started at least once.
func initialized(rt *model.Pod) bool {
	for _, c := range rt.Init {
		switch {
		case c.Kind == model.KindNativeSidecar:
			if c.State == model.Waiting && c.Last == nil {
				return false
			}
		case c.State != model.Terminated || c.ExitCode != 0:
			return false
		}
	}
	return true
}

// containersReady: the pod is not finished and every regular container and
// native sidecar runs (no probes are modelled).
func containersReady(rt *model.Pod, phase corev1.PodPhase) (bool, string) {
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		return false, "PodCompleted"
	}
	for _, c := range rt.Init {
		if c.Kind == model.KindNativeSidecar && c.State != model.Running {
			return false, "ContainersNotReady"
		}
	}
	for _, c := range rt.Regular {
		if c.State != model.Running {
			return false, "ContainersNotReady"
		}
	}
	return true, ""
}
