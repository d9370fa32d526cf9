package model

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

func restartAllOn(c corev1.Container, codes ...int32) corev1.Container {
	never := corev1.ContainerRestartPolicyNever
	c.RestartPolicy = &never
	c.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
	return c
}

// A stop of a sidecar whose RestartAllContainers rule matches the exit it
// produces makes the kubelet kill and remove every container and start the
// pod again: the finished main runs a second time.
func TestAStopMatchingRestartAllContainersRunsTheFinishedMainAgain(t *testing.T) {
	p := newPod(t, corev1.RestartPolicyNever, ctr("main", "main", "--seconds", "5"), restartAllOn(ctr("side", "sidecar"), 143))
	runUntil(p, 10*time.Second)
	main := p.Container("main")
	if main.State != Terminated || main.ExitCode != 0 || p.Phase != corev1.PodRunning {
		t.Fatalf("before the stop: main %s(%d), phase %s", main.State, main.ExitCode, p.Phase)
	}
	side := p.Container("side")
	side.Behaviour.SIGTERMExitCode = 143 // a sidecar that dies of SIGTERM
	at := t0.Add(10 * time.Second)
	if ok, err := p.Stop("side", at); !ok || err != nil {
		t.Fatalf("Stop: %v %v", ok, err)
	}
	p.Advance(at.Add(300 * time.Millisecond))
	if p.RestartedAll() != 1 {
		t.Fatalf("in-place restarts %d, want 1 (side exited %d)", p.RestartedAll(), side.ExitCode)
	}
	st := p.Status()
	for _, cs := range st.ContainerStatuses {
		if cs.State.Waiting == nil || cs.LastTerminationState.Terminated == nil ||
			cs.LastTerminationState.Terminated.Reason != decision.RestartingAllContainersReason {
			t.Errorf("container %s after the reset: %+v, want waiting with last state %s", cs.Name, cs.State, decision.RestartingAllContainersReason)
		}
	}
	p.Advance(at.Add(2 * time.Second))
	if main.State != Running || main.instances != 2 {
		t.Fatalf("main %s after %d instances, want running its second", main.State, main.instances)
	}
	if p.Terminal() {
		t.Fatalf("phase %s, want the pod running again", p.Phase)
	}
}

// The same stop on a sidecar whose rule matches only exit 42 ends the pod.
func TestAStopNotMatchingTheRuleFinishesThePod(t *testing.T) {
	p := newPod(t, corev1.RestartPolicyNever, ctr("main", "main", "--seconds", "5"), restartAllOn(ctr("side", "sidecar"), 42))
	runUntil(p, 10*time.Second)
	if _, err := p.Stop("side", t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	p.Advance(t0.Add(12 * time.Second))
	if p.RestartedAll() != 0 || p.Phase != corev1.PodSucceeded {
		t.Fatalf("in-place restarts %d, phase %s; want 0 and Succeeded", p.RestartedAll(), p.Phase)
	}
}

// A main whose own rule matches restarts the whole pod, the running sidecar
// included (killed with the grace period, then started again), and the main
// then runs its next scripted exit.
func TestAMainMatchingRestartAllContainersRestartsEveryContainer(t *testing.T) {
	main := restartAllOn(ctr("main", "main", "--seconds", "5", "--exit-codes", "42,0", "--count-file", "/data/n"), 42)
	p := newPod(t, corev1.RestartPolicyNever, main, ctr("side", "sidecar"))
	runUntil(p, 8*time.Second)
	if p.RestartedAll() != 1 {
		t.Fatalf("in-place restarts %d, want 1", p.RestartedAll())
	}
	runUntil(p, 20*time.Second)
	m, s := p.Container("main"), p.Container("side")
	if m.State != Terminated || m.ExitCode != 0 || s.State != Running || s.instances != 2 {
		t.Fatalf("main %s(%d), side %s (%d instances); want main exited 0 on its second run, side running its second instance",
			m.State, m.ExitCode, s.State, s.instances)
	}
}
