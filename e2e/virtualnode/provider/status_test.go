package provider

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
)

var sidecarArgs = []string{"sidecar", "--on-sigterm", "exit:0"}

func mainArgs(sec string) []string { return []string{"main", "--seconds", sec, "--exit-code", "0"} }

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// The status carries what a kubelet adds to the container states, and keeps
// the conditions others own.
func TestStatusCarriesKubeletFieldsAndKeepsOthersConditions(t *testing.T) {
	n := newNode(t)
	pod := jobPod(corev1.RestartPolicyNever, mainArgs("2"), DefaultWorkloadImage, sidecarArgs)
	if err := n.p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	n.run(time.Second, nil)
	running := n.last(t)
	if running.Status.Phase != corev1.PodRunning || running.Status.HostIP != "127.0.0.1" || running.Status.StartTime == nil ||
		running.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("running pod status: %+v", running.Status)
	}
	if c := condition(running, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled not kept: %+v", running.Status.Conditions)
	}
	if c := condition(running, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("Ready while both containers run: %+v", c)
	}
	readySince := condition(running, corev1.PodReady).LastTransitionTime

	// The controller's swap; the pod ends Succeeded and not Ready.
	n.run(4*time.Second, map[time.Duration]func(){3 * time.Second: swapImage(t, n, pod, DefaultQuickExitImage)})
	n.run(10*time.Second, nil)
	done := n.last(t)
	if c := condition(done, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted" ||
		!c.LastTransitionTime.After(readySince.Time) {
		t.Errorf("Ready at the end: %+v (was True since %s)", c, readySince)
	}
	if got := done.Spec.Containers[1].Image; got != DefaultQuickExitImage {
		t.Errorf("the published pod's spec has sidecar image %s", got)
	}
}

// GetPod hands out copies: changing one changes nothing in the provider.
func TestGetPodReturnsACopy(t *testing.T) {
	n := newNode(t)
	pod := jobPod(corev1.RestartPolicyNever, mainArgs("2"), DefaultWorkloadImage, sidecarArgs)
	if err := n.p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[0].Image = "changed-by-caller" // the caller's object is not ours either
	got, err := n.p.GetPod(context.Background(), "ns", "job-1")
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Containers[1].Image = "changed-by-caller"
	got.Status.Phase = corev1.PodFailed
	again, _ := n.p.GetPod(context.Background(), "ns", "job-1")
	if again.Spec.Containers[0].Image != DefaultWorkloadImage || again.Spec.Containers[1].Image != DefaultWorkloadImage ||
		again.Status.Phase == corev1.PodFailed {
		t.Errorf("provider state changed through a returned or handed-in pod: %+v", again)
	}
}

// DeletePod stops the containers (SIGTERM: the main reports 143, the
// sidecar its own code) and forgets the pod once none runs.
func TestDeletePodStopsContainersThenForgets(t *testing.T) {
	n := newNode(t)
	pod := jobPod(corev1.RestartPolicyNever, mainArgs("60"), DefaultWorkloadImage, sidecarArgs)
	if err := n.p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	n.run(2*time.Second, map[time.Duration]func(){time.Second + 500*time.Millisecond: func() {
		if err := n.p.DeletePod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}})
	n.run(10*time.Second, nil)
	// The phase is left as the model has it while deleting; virtual-kubelet
	// removes the pod from the API after its grace period either way.
	last := n.last(t)
	if got, want := summary(last)[len(last.Status.Phase):], " main=T:143/0 sidecar=T:0/0"; got != want {
		t.Errorf("last status %q, want %q\n%s", got, want, history(n))
	}
	if _, err := n.p.GetPod(context.Background(), "ns", "job-1"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod after the containers stopped: %v, want NotFound", err)
	}
	if err := n.p.DeletePod(context.Background(), pod); !errdefs.IsNotFound(err) {
		t.Errorf("second DeletePod: %v, want NotFound", err)
	}
}

// A container whose argv is not the workload grammar cannot be played: the
// pod is refused as invalid input, which virtual-kubelet reports on it.
func TestCreatePodRefusesUnknownArgv(t *testing.T) {
	n := newNode(t)
	pod := jobPod(corev1.RestartPolicyNever, []string{"sleep", "3600"}, DefaultWorkloadImage, sidecarArgs)
	if err := n.p.CreatePod(context.Background(), pod); !errdefs.IsInvalidInput(err) {
		t.Errorf("CreatePod: %v, want invalid input", err)
	}
}

// virtual-kubelet's pod workers call the provider in parallel with its Run
// loop; run with -race.
func TestConcurrentCallsAreSafe(t *testing.T) {
	n := newNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.p.Run(ctx)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				pod := jobPod(corev1.RestartPolicyNever, mainArgs("1"), DefaultWorkloadImage, sidecarArgs)
				pod.Name = fmt.Sprintf("pod-%d-%d", w, i)
				_ = n.p.CreatePod(ctx, pod)
				n.clock.Step(100 * time.Millisecond)
				up := pod.DeepCopy()
				up.Spec.Containers[1].Image = DefaultQuickExitImage
				_ = n.p.UpdatePod(ctx, up)
				_, _ = n.p.GetPods(ctx)
				_, _ = n.p.GetPodStatus(ctx, pod.Namespace, pod.Name)
				_ = n.p.DeletePod(ctx, pod)
			}
		}()
	}
	wg.Wait()
}
