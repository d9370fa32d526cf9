package apiserver

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

const quickExit = "ghcr.io/sidecar-terminator/quick-exit:dev"

// jobPod is a pod whose main container exited a moment ago; the sidecar runs.
func jobPod(name, node string, mainDone bool, sidecarEnv ...corev1.EnvVar) *corev1.Pod {
	var opts []podtest.Option
	for _, e := range sidecarEnv {
		opts = append(opts, podtest.Env(e.Name, e.Value))
	}
	main := []podtest.Option{podtest.Running()}
	if mainDone {
		main = []podtest.Option{podtest.Exited(0, time.Now().Truncate(time.Second))}
	}
	p := podtest.Pod(name).UID("").Node(node).Container("main", main...).Container("sidecar", opts...).Build()
	p.TypeMeta = metav1.TypeMeta{}
	return p
}

var (
	envCRR   = corev1.EnvVar{Name: decision.EnvTerminate, Value: "true"}
	envImage = corev1.EnvVar{Name: decision.EnvTerminateWithImage, Value: quickExit}
)

// TestRealBinaryAgainstRealAPIServer starts the controller binary with its own
// ServiceAccount's kubeconfig, plays the kubelet, and checks that a pod on a
// normal node gets one CRR, a pod on a virtual node one image patch, a pod
// whose main still runs nothing at all, and a pod with no path a Warning.
func TestRealBinaryAgainstRealAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	e.createNode(t, ctx, "normal-1", map[string]string{"kubernetes.io/hostname": "normal-1"})
	e.createNode(t, ctx, "virtual-1", map[string]string{"type": "virtual-kubelet"})

	crrPod := e.createPod(t, ctx, jobPod("crr-pod", "normal-1", true, envCRR))
	swapPod := e.createPod(t, ctx, jobPod("swap-pod", "virtual-1", true, envCRR, envImage))
	noPathPod := e.createPod(t, ctx, jobPod("no-path-pod", "virtual-1", true, envCRR))
	runningPod := e.createPod(t, ctx, jobPod("running-pod", "normal-1", false, envCRR, envImage))

	crrName := decision.CRRName(crrPod, 1)
	waitUntil(t, ctx, "the CRR of crr-pod", func(ctx context.Context) (bool, error) {
		_, err := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(ctx, crrName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	crr, _ := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(ctx, crrName, metav1.GetOptions{})
	if crr.Spec.PodName != "crr-pod" || len(crr.Spec.Containers) != 1 || crr.Spec.Containers[0].Name != "sidecar" ||
		crr.Labels[reconciler.LabelManagedBy] != reconciler.ManagedByValue || crr.OwnerReferences[0].UID != crrPod.UID ||
		!crr.Spec.Strategy.ForceRecreate || *crr.Spec.ActiveDeadlineSeconds != 60 || crr.Spec.TTLSecondsAfterFinished == nil {
		t.Errorf("CRR as created: %+v", crr)
	}
	waitUntil(t, ctx, "the image swap of swap-pod", func(ctx context.Context) (bool, error) {
		p, err := e.kube.CoreV1().Pods("default").Get(ctx, "swap-pod", metav1.GetOptions{})
		return err == nil && p.Spec.Containers[1].Image == quickExit, err
	})
	e.waitForEvent(t, ctx, crrPod, "Normal "+reconciler.ReasonTerminated)
	e.waitForEvent(t, ctx, swapPod, "Normal "+reconciler.ReasonTerminated)
	e.waitForEvent(t, ctx, noPathPod, "Warning "+decision.ReasonNoTerminationPath)

	// The pod whose main runs: make the controller look at it again, and wait
	// until its metrics show it decided "main active" for it, then check that
	// it wrote nothing.
	before, _ := e.metric(ctx, `sidecar_terminator_decisions_total{verdict="MainsActive"}`)
	runningPod.Status.ContainerStatuses[1].RestartCount = 1
	if _, err := e.kube.CoreV1().Pods("default").UpdateStatus(ctx, runningPod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "a decision on running-pod", func(ctx context.Context) (bool, error) {
		now, err := e.metric(ctx, `sidecar_terminator_decisions_total{verdict="MainsActive"}`)
		return now > before, err
	})
	if p, _ := e.kube.CoreV1().Pods("default").Get(ctx, "running-pod", metav1.GetOptions{}); p.Spec.Containers[1].Image == quickExit {
		t.Errorf("running-pod's sidecar image was swapped while its main runs")
	}
	if evs, _ := e.events(ctx, runningPod); len(evs) != 0 {
		t.Errorf("running-pod has events %v", evs)
	}

	// Writes, as the API server's audit log recorded them: exactly one per
	// terminated pod, none for the others.
	var writes []string
	waitUntil(t, ctx, "the audit log to show both writes", func(context.Context) (bool, error) {
		writes = e.controllerWrites(t)
		return len(writes) >= 2, nil
	})
	want := []string{"create containerrecreaterequests " + crrName + " 201", "patch pods swap-pod 200"}
	slices.Sort(writes)
	if !slices.Equal(writes, want) {
		t.Errorf("controller writes:\n %s\nwant:\n %s", strings.Join(writes, "\n "), strings.Join(want, "\n "))
	}
	t.Logf("writes per terminated pod: %.1f (%d writes, 2 pods terminated)", float64(len(writes))/2, len(writes))
	if n, _ := e.metric(ctx, `sidecar_terminator_actions_total{method="ContainerRecreateRequest",result="success"}`); n != 1 {
		t.Errorf("CRR actions metric = %v, want 1", n)
	}

	// explain, run as a person would, tells the same story for each pod.
	for pod, want := range map[string][]string{
		"crr-pod":     {"sidecar", "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "Decision: InProgress", crrName},
		"running-pod": {"main", "running", "Decision: MainsActive"},
		"no-path-pod": {"Decision: NoPath", "virtual node", "NoTerminationPath"},
	} {
		out, err := exec.CommandContext(ctx, e.bin, "explain", "--kubeconfig", e.cp.Kubeconfig, "-n", "default", pod).CombinedOutput()
		if err != nil {
			t.Fatalf("explain %s: %v\n%s", pod, err, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("explain %s lacks %q:\n%s", pod, w, out)
			}
		}
	}
}

// TestWithoutOpenKruiseTheControllerSwapsImages: no CRR API installed. The
// controller starts, swaps the image where one is known, and warns where
// there is no path.
func TestWithoutOpenKruiseTheControllerSwapsImages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, false)
	e.createNode(t, ctx, "normal-1", nil)
	both := e.createPod(t, ctx, jobPod("both-marks", "normal-1", true, envCRR, envImage))
	plain := e.createPod(t, ctx, jobPod("plain-mark", "normal-1", true, envCRR))
	waitUntil(t, ctx, "the image swap of both-marks", func(ctx context.Context) (bool, error) {
		p, err := e.kube.CoreV1().Pods("default").Get(ctx, both.Name, metav1.GetOptions{})
		return err == nil && p.Spec.Containers[1].Image == quickExit, err
	})
	e.waitForEvent(t, ctx, plain, "Warning "+decision.ReasonNoTerminationPath)
	if p, _ := e.kube.CoreV1().Pods("default").Get(ctx, plain.Name, metav1.GetOptions{}); p.Spec.Containers[1].Image == quickExit {
		t.Errorf("plain-mark was swapped with no image given")
	}
}
