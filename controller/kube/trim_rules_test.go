package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The cache keeps every container's restartPolicy and restartPolicyRules: a
// main whose own rule restarts it must not look done in the cache.
func TestTrimPodKeepsRestartRules(t *testing.T) {
	never, always := corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyAlways
	restartAll := podtest.Rule(corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0)
	full := podtest.Pod("job-r").
		Init("setup", podtest.Policy(never), podtest.RestartOn(3)).
		NativeSidecar("mesh").
		Container("main", podtest.Policy(never), podtest.RestartOn(42), podtest.Exited(42, podtest.Epoch.Add(10*time.Second))).
		Container("aux", podtest.Policy(corev1.ContainerRestartPolicyOnFailure), restartAll, podtest.Exited(0, podtest.Epoch)).
		Container("log", podtest.Env(decision.EnvTerminate, "true"), podtest.Policy(always)).Build()
	obj, _ := TrimPod(full.DeepCopy())
	trimmed := obj.(*corev1.Pod)

	pairs := [][2][]corev1.Container{{full.Spec.InitContainers, trimmed.Spec.InitContainers}, {full.Spec.Containers, trimmed.Spec.Containers}}
	for _, pair := range pairs {
		for i := range pair[0] {
			want, got := pair[0][i], pair[1][i]
			if diff := cmp.Diff(want.RestartPolicy, got.RestartPolicy); diff != "" {
				t.Errorf("container %q restartPolicy dropped (-full +trimmed):\n%s", want.Name, diff)
			}
			if diff := cmp.Diff(want.RestartPolicyRules, got.RestartPolicyRules); diff != "" {
				t.Errorf("container %q restartPolicyRules dropped (-full +trimmed):\n%s", want.Name, diff)
			}
		}
	}
	in := func(p *corev1.Pod) decision.Input {
		return decision.Input{Pod: p, Node: decision.Node{Name: "node-1", Found: true}, CRRAPI: true, Now: podtest.Epoch.Add(time.Minute), Policy: decision.DefaultPolicy()}
	}
	plan := decision.Decide(in(trimmed))
	if plan.Verdict != decision.VerdictMainsActive {
		t.Errorf("trimmed pod whose main restarts by its rule: verdict %s (%s), want %s", plan.Verdict, plan.Reason, decision.VerdictMainsActive)
	}
	if want := decision.Decide(in(full)); want.Verdict != plan.Verdict || want.Reason != plan.Reason {
		t.Errorf("the decision differs on the trimmed pod: full %s (%s), trimmed %s (%s)", want.Verdict, want.Reason, plan.Verdict, plan.Reason)
	}
}

// The terminated reason the kubelet gives a container it stopped to restart
// the pod in place survives the trim, and nothing else of the reason does.
func TestTrimPodKeepsTheRestartAllReason(t *testing.T) {
	pod := podtest.Pod("job-s").Container("main", podtest.Exited(0, podtest.Epoch)).Container("log", podtest.Exited(1, podtest.Epoch)).Build()
	pod.Status.ContainerStatuses[0].State.Terminated.Reason = decision.RestartingAllContainersReason
	pod.Status.ContainerStatuses[1].State.Terminated.Reason = "Error"
	obj, _ := TrimPod(pod.DeepCopy())
	got := obj.(*corev1.Pod).Status.ContainerStatuses
	if got[0].State.Terminated.Reason != decision.RestartingAllContainersReason || got[1].State.Terminated.Reason != "" {
		t.Errorf("reasons after trim %q, %q; want %q, empty", got[0].State.Terminated.Reason, got[1].State.Terminated.Reason, decision.RestartingAllContainersReason)
	}
	if !decision.RestartingAllContainers(obj.(*corev1.Pod)) {
		t.Errorf("the trimmed pod no longer shows its in-place restart")
	}
}

// The informer's transform trims the pod it decoded rather than a copy of
// it: the pod it returns is the one it was given, each list in its own
// storage, so a burst's events allocate no second pod.
func TestTrimPodTrimsThePodItIsGiven(t *testing.T) {
	pod := kubeletJobPod(1)
	containers, statuses, conditions := &pod.Spec.Containers[0], &pod.Status.ContainerStatuses[0], &pod.Status.Conditions[0]
	obj, err := TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	trimmed, ok := obj.(*corev1.Pod)
	if !ok || trimmed != pod {
		t.Fatalf("TrimPod returned %T %p, not the pod it was given (%p)", obj, obj, pod)
	}
	if &trimmed.Spec.Containers[0] != containers || &trimmed.Status.ContainerStatuses[0] != statuses || &trimmed.Status.Conditions[0] != conditions {
		t.Error("a list of the trimmed pod is a new one")
	}
	if len(trimmed.Labels) != 0 || trimmed.Status.PodIP != "" || len(trimmed.Spec.Containers[0].Args) != 0 || trimmed.Status.ContainerStatuses[0].ImageID != "" {
		t.Errorf("the pod given was not trimmed: %+v", trimmed)
	}
}
