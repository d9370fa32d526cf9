package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

const unpullable = "registry.invalid/never-pulls:1"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// node is a provider on a fake clock that records every status it
// publishes; time moves only through run.
type node struct {
	p         *Provider
	clock     *clocktesting.FakeClock
	published []*corev1.Pod
}

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{clock: clocktesting.NewFakeClock(epoch)}
	cfg := DefaultConfig("virtual-1")
	cfg.Clock, cfg.Unpullable = n.clock, []string{unpullable}
	cfg.Timings.RestartBackoff = time.Second
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.NotifyPods(context.Background(), func(pod *corev1.Pod) { n.published = append(n.published, pod) })
	n.p = p
	return n
}

// run plays the node until `until` after epoch, jumping from one due
// transition or action to the next, as the Run loop would, but
// synchronously.
func (n *node) run(until time.Duration, actions map[time.Duration]func()) {
	end := epoch.Add(until)
	for {
		target := end
		if next := n.p.Tick(); !next.IsZero() && next.Before(target) {
			target = next
		}
		act := time.Duration(-1)
		for at := range actions {
			if due := epoch.Add(at); !due.After(target) && (act < 0 || at < act) {
				act = at
			}
		}
		if act >= 0 {
			target = epoch.Add(act)
		}
		if target.After(n.clock.Now()) {
			n.clock.SetTime(target)
		}
		switch {
		case act >= 0:
			actions[act]()
			delete(actions, act)
		case !target.Before(end):
			n.p.Tick()
			return
		}
	}
}

// last is the newest published status of the pod.
func (n *node) last(t *testing.T) *corev1.Pod {
	t.Helper()
	if len(n.published) == 0 {
		t.Fatal("no status published")
	}
	return n.published[len(n.published)-1]
}

func jobPod(policy corev1.RestartPolicy, mainArgs []string, sidecarImage string, sidecarArgs []string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-1", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.PodSpec{RestartPolicy: policy, NodeName: "virtual-1", TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{
				{Name: "main", Image: DefaultWorkloadImage, Args: mainArgs},
				{Name: "sidecar", Image: sidecarImage, Args: sidecarArgs},
			}},
		Status: corev1.PodStatus{QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
}

// swapImage is what the controller does on a virtual node: a new image
// for the sidecar, through virtual-kubelet's UpdatePod.
func swapImage(t *testing.T, n *node, pod *corev1.Pod, image string) func() {
	return func() {
		up := pod.DeepCopy()
		up.Spec.Containers[1].Image = image
		if err := n.p.UpdatePod(context.Background(), up); err != nil {
			t.Fatal(err)
		}
	}
}

// summary is a pod status in one line: phase, then each container as
// name=state[:code|reason]/restarts@image-suffix.
func summary(p *corev1.Pod) string {
	out := string(p.Status.Phase)
	for _, c := range p.Status.ContainerStatuses {
		st := "?"
		switch {
		case c.State.Running != nil:
			st = "R"
		case c.State.Terminated != nil:
			st = fmt.Sprintf("T:%d", c.State.Terminated.ExitCode)
		case c.State.Waiting != nil:
			st = "W:" + c.State.Waiting.Reason
		}
		out += fmt.Sprintf(" %s=%s/%d", c.Name, st, c.RestartCount)
	}
	return out
}

func TestRestartRules(t *testing.T) {
	quick := DefaultQuickExitImage
	main := func(sec, code string) []string { return []string{"main", "--seconds", sec, "--exit-code", code} }
	sidecar := []string{"sidecar", "--on-sigterm", "exit:0"}
	cases := map[string]struct {
		// setup
		policy       corev1.RestartPolicy
		mainArgs     []string
		exitScript   string // the main's successive exit codes
		mainPolicy   corev1.ContainerRestartPolicy
		mainRules    []corev1.ContainerRestartRule // with mainPolicy
		sidecarImage string
		swapAt       time.Duration // 0: no image swap
		until        time.Duration
		// expectations
		want string
	}{
		"Never: a main that exits 0 leaves the sidecar running": {
			policy: corev1.RestartPolicyNever, mainArgs: main("2", "0"), sidecarImage: DefaultWorkloadImage,
			until: 10 * time.Second, want: "Running main=T:0/0 sidecar=R/0"},
		"Never: a main that exits 1 is not restarted": {
			policy: corev1.RestartPolicyNever, mainArgs: main("2", "1"), sidecarImage: DefaultWorkloadImage,
			until: 30 * time.Second, want: "Running main=T:1/0 sidecar=R/0"},
		"OnFailure: a main that exits 1 is restarted until it exits 0": {
			policy: corev1.RestartPolicyOnFailure, mainArgs: main("1", "0"), exitScript: "1,1,0", sidecarImage: DefaultWorkloadImage,
			until: 30 * time.Second, want: "Running main=T:0/2 sidecar=R/0"},
		// The swap stops the running sidecar (SIGTERM) and starts the
		// quick-exit image in the same kubelet sync, under any restart
		// policy (sim/model, apply): the new instance's 0 is what the status
		// shows, and the pod settles once it has exited.
		"Never: an image swap stops the sidecar; the pod Succeeds": {
			policy: corev1.RestartPolicyNever, mainArgs: main("2", "0"), sidecarImage: DefaultWorkloadImage,
			swapAt: 5 * time.Second, until: 15 * time.Second, want: "Succeeded main=T:0/0 sidecar=T:0/1"},
		"OnFailure: an image swap stops the sidecar; the pod Succeeds": {
			policy: corev1.RestartPolicyOnFailure, mainArgs: main("2", "0"), sidecarImage: DefaultWorkloadImage,
			swapAt: 5 * time.Second, until: 15 * time.Second, want: "Succeeded main=T:0/0 sidecar=T:0/1"},
		"an image swap while the main runs restarts the sidecar with the new image": {
			policy: corev1.RestartPolicyNever, mainArgs: main("20", "0"), sidecarImage: DefaultWorkloadImage,
			swapAt: 5 * time.Second, until: 10 * time.Second, want: "Running main=R/0 sidecar=T:0/1"},
		"an image that cannot be pulled waits in ErrImagePull": {
			policy: corev1.RestartPolicyNever, mainArgs: main("2", "0"), sidecarImage: unpullable,
			until: 15 * time.Second, want: "Pending main=T:0/0 sidecar=W:ErrImagePull/0"},
		"a sidecar that never pulled starts with the swapped image and exits 0": {
			policy: corev1.RestartPolicyNever, mainArgs: main("2", "0"), sidecarImage: unpullable,
			swapAt: 5 * time.Second, until: 15 * time.Second, want: "Succeeded main=T:0/0 sidecar=T:0/0"},
		// The container's own restart rules (KEP-5307), through the same
		// function the controller decides with (sim/model → decision).
		"pod Never, main restartPolicy OnFailure fails once: restarted, then done": {
			policy: corev1.RestartPolicyNever, mainPolicy: corev1.ContainerRestartPolicyOnFailure, mainArgs: main("1", "0"), exitScript: "1,0",
			sidecarImage: DefaultWorkloadImage, until: 20 * time.Second, want: "Running main=T:0/1 sidecar=R/0"},
		"pod Never, main rule Restart on 42 exits 42 once: restarted, then done": {
			policy: corev1.RestartPolicyNever, mainPolicy: corev1.ContainerRestartPolicyNever, mainRules: []corev1.ContainerRestartRule{{
				Action:    corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}},
			mainArgs: main("1", "0"), exitScript: "42,0", sidecarImage: DefaultWorkloadImage, until: 20 * time.Second, want: "Running main=T:0/1 sidecar=R/0"},
		"pod OnFailure, main restartPolicy Never exits 1: not restarted; the pod fails on it after the swap": {
			policy: corev1.RestartPolicyOnFailure, mainPolicy: corev1.ContainerRestartPolicyNever, mainArgs: main("2", "1"),
			sidecarImage: DefaultWorkloadImage, swapAt: 5 * time.Second, until: 15 * time.Second, want: "Failed main=T:1/0 sidecar=T:0/1"},
		"the quick-exit image exits 0 at once, whatever its argv": {
			policy: corev1.RestartPolicyNever, mainArgs: main("2", "0"), sidecarImage: quick,
			until: 15 * time.Second, want: "Succeeded main=T:0/0 sidecar=T:0/0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := newNode(t)
			pod := jobPod(tc.policy, tc.mainArgs, tc.sidecarImage, sidecar)
			if tc.exitScript != "" {
				pod.Annotations = map[string]string{model.AnnotationExitCodesPrefix + "main": tc.exitScript}
			}
			if tc.mainPolicy != "" {
				pod.Spec.Containers[0].RestartPolicy = &tc.mainPolicy
				pod.Spec.Containers[0].RestartPolicyRules = tc.mainRules
			}
			if err := n.p.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			actions := map[time.Duration]func(){}
			if tc.swapAt > 0 {
				actions[tc.swapAt] = swapImage(t, n, pod, quick)
			}
			n.run(tc.until, actions)
			if got := summary(n.last(t)); got != tc.want {
				t.Errorf("status %q, want %q\nall published:\n%s", got, tc.want, history(n))
			}
		})
	}
}

func history(n *node) string {
	out := ""
	for _, p := range n.published {
		out += "  " + summary(p) + "\n"
	}
	return out
}
