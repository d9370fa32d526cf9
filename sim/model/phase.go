package model

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Status is the pod status the kubelet reports: phase and container statuses.
// Conditions are not modelled; whoever publishes the status keeps its own.
func (p *Pod) Status() corev1.PodStatus {
	st := corev1.PodStatus{Phase: p.Phase}
	for _, c := range p.Init {
		st.InitContainerStatuses = append(st.InitContainerStatuses, c.status())
	}
	for _, c := range p.Regular {
		st.ContainerStatuses = append(st.ContainerStatuses, c.status())
	}
	return st
}

func (c *Container) status() corev1.ContainerStatus {
	started := c.State == Running
	s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ContainerID: c.ID, RestartCount: c.RestartCount, Started: &started}
	switch c.State {
	case Running:
		s.Ready = true
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
	case Terminated:
		reason := "Completed"
		if c.ExitCode != 0 {
			reason = "Error"
		}
		s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: c.ExitCode, Reason: reason,
			StartedAt: metav1.NewTime(c.StartedAt), FinishedAt: metav1.NewTime(c.FinishedAt), ContainerID: c.ID}
	default:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: c.Reason}
	}
	if c.Last != nil {
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: c.Last.ExitCode, FinishedAt: metav1.NewTime(c.Last.FinishedAt), Reason: c.Last.Reason}
	}
	return s
}

// phase is the kubelet's getPhase over the model's containers, with the pod
// terminal once no container will run again. As in k8s.io/kubernetes@v1.35.4
// pkg/kubelet/kubelet_pods.go getPhase with ContainerRestartRules on, a
// stopped container counts as restarting by its restart rules alone. A
// container restarted for a spec change never shows as stopped (the kubelet
// kills and starts it in one sync: lifecycle.go, apply), except when its new
// image cannot be pulled, and then the phase settles on the killed exit.
func (p *Pod) phase() corev1.PodPhase {
	pendingInit, failedInit, pendingNative := p.initCounts()
	var running, waiting, stopped, succeeded, restartable int
	for _, c := range p.Init {
		if c.Kind == KindNativeSidecar && c.State == Running {
			running++
		}
	}
	for _, c := range p.Regular {
		switch {
		case c.State == Running:
			running++
		case c.State == Terminated:
			stopped++
			if c.ExitCode == 0 {
				succeeded++
			}
			if p.ruleRestarts(c, c.ExitCode) {
				restartable++
			}
		case c.Last != nil:
			stopped++
			if p.ruleRestarts(c, c.Last.ExitCode) {
				restartable++
			}
		default:
			waiting++
		}
	}
	if failedInit > 0 {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0 || pendingNative > 0 || waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch {
		case p.terminal() && stopped == succeeded:
			return corev1.PodSucceeded
		case p.terminal():
			return corev1.PodFailed
		case restartable > 0:
			return corev1.PodRunning // a container is restarting
		case stopped == succeeded:
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

// initCounts counts, as getPhase does, init containers still to complete,
// init containers that failed and will not be restarted, and native sidecars
// not started yet.
func (p *Pod) initCounts() (pendingInit, failedInit, pendingNative int) {
	for _, c := range p.Init {
		switch {
		case c.Kind == KindNativeSidecar:
			if c.State == Waiting && c.Last == nil {
				pendingNative++
			}
		case c.State == Running:
			pendingInit++
		case c.State == Terminated:
			if c.ExitCode != 0 && !p.ruleRestarts(c, c.ExitCode) {
				failedInit++
			}
		case c.Last != nil:
			if c.Last.ExitCode != 0 && !p.ruleRestarts(c, c.Last.ExitCode) {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	return pendingInit, failedInit, pendingNative
}

// terminal reports whether no container of the pod will run again.
func (p *Pod) terminal() bool {
	if !p.regularDone() {
		return false
	}
	for _, c := range p.Init {
		if c.State == Running || c.op != opNone {
			return false
		}
	}
	return true
}

// ruleRestarts is the kubelet's restart rules for the container's exit,
// without the model's own reasons to restart (a spec change).
func (p *Pod) ruleRestarts(c *Container, exitCode int32) bool {
	return decision.RestartsAfter(p.RestartPolicy, &c.rules, exitCode)
}
