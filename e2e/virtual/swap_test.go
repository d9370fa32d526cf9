package virtual

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// TestImageSwapOnVirtualNodes runs each image-swap case as its own Job in its
// own namespace, all at once.
func TestImageSwapOnVirtualNodes(t *testing.T) {
	testenv.TestInParallel(t,
		swapCompletes("never-with-image", jobSpec{policy: corev1.RestartPolicyNever,
			main: mainFor(2, 0), sidecar: sidecarExit(0), sidecarEnv: []corev1.EnvVar{envImage}}),
		swapCompletes("onfailure-with-image", jobSpec{policy: corev1.RestartPolicyOnFailure,
			main: mainFor(2, 0), sidecar: sidecarExit(0), sidecarEnv: []corev1.EnvVar{envImage}}),
		// On a virtual node the CRR path does not exist, so a sidecar marked
		// for both is swapped, not recreated.
		swapCompletes("both-envs", jobSpec{policy: corev1.RestartPolicyNever,
			main: mainFor(2, 0), sidecar: sidecarExit(0), sidecarEnv: []corev1.EnvVar{envPlain, envImage}}),
		// The sidecar never pulled: it cannot be signalled, but a new image
		// makes the node pull and run the quick-exit image instead.
		swapCompletes("unpulled-sidecar", jobSpec{policy: corev1.RestartPolicyNever, sidecarImage: unpullableImage,
			main: mainFor(2, 0), sidecar: sidecarExit(0), sidecarEnv: []corev1.EnvVar{envImage}}),
		onFailureMainRestartsBeforeSwap(),
		plainEnvWarns(),
		ignoreExitCodeSettles(),
	)
}

// swapCompletes: the Job completes, its pod Succeeds with every container
// exited 0, the sidecar now runs the quick-exit image, and the controller
// wrote exactly one thing: the image patch, after the main had exited 0.
func swapCompletes(name string, js jobSpec) features.Feature {
	js.name = name
	return features.New(name).WithLabel("path", "image-swap").
		Assess("job completes through one image swap", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns := newNamespace(ctx, t, name)
			obs := runJob(ctx, t, ns, js, 2*time.Minute)
			if got := jobFinished(obs.job); got != batchv1.JobComplete {
				t.Fatalf("job ended %q, want Complete\n%s", got, describePods(obs))
			}
			pod := onlyPod(t, obs)
			checkSucceededWithSwap(t, pod)
			checkSwapOnlyAfterMainsDone(t, obs)
			if js.sidecarImage == unpullableImage && !sawWaiting(obs, "sidecar", "ErrImagePull") {
				t.Errorf("the sidecar was never seen waiting in ErrImagePull")
			}
			waitForEvent(ctx, t, pod, "Normal "+reconciler.ReasonTerminated)
			checkWrites(t, ns, []string{"patch pods " + pod.Name + " 200"})
			return ctx
		}).Feature()
}

// onFailureMainRestartsBeforeSwap: under OnFailure a main that exits 1 is
// restarted by the node; the controller must wait. The main fails twice,
// then succeeds; the sidecar is swapped only after that.
func onFailureMainRestartsBeforeSwap() features.Feature {
	const name = "onfailure-main-fails-twice"
	js := jobSpec{name: name, policy: corev1.RestartPolicyOnFailure, main: mainFor(1, 0), mainCodes: "1,1,0",
		sidecar: sidecarExit(0), sidecarEnv: []corev1.EnvVar{envImage}}
	return features.New(name).WithLabel("path", "image-swap").
		Assess("no swap while the main restarts; one swap after it succeeds", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns := newNamespace(ctx, t, name)
			obs := runJob(ctx, t, ns, js, 2*time.Minute)
			if got := jobFinished(obs.job); got != batchv1.JobComplete {
				t.Fatalf("job ended %q, want Complete\n%s", got, describePods(obs))
			}
			pod := onlyPod(t, obs)
			if m := containerStatus(pod, "main"); m == nil || m.RestartCount != 2 {
				t.Errorf("main status %+v, want 2 restarts", m)
			}
			if !sawTerminated(obs, "main", 1) {
				t.Errorf("the main was never seen terminated with exit 1: the case did not test the wait")
			}
			checkSucceededWithSwap(t, pod)
			checkSwapOnlyAfterMainsDone(t, obs)
			checkWrites(t, ns, []string{"patch pods " + pod.Name + " 200"})
			return ctx
		}).Feature()
}

// plainEnvWarns: on a virtual node, a sidecar marked only with the plain
// env has no way to be stopped (no kruise-daemon, no image): a Warning, and
// the pod is left alone.
func plainEnvWarns() features.Feature {
	const name = "plain-env-only"
	js := jobSpec{name: name, policy: corev1.RestartPolicyNever, main: mainFor(1, 0),
		sidecar: sidecarExit(0), sidecarEnv: []corev1.EnvVar{envPlain}}
	return features.New(name).WithLabel("path", "none").
		Assess("a Warning and nothing else", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns := newNamespace(ctx, t, name)
			if _, err := suite.kube.BatchV1().Jobs(ns).Create(ctx, js.job(ns), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var pod *corev1.Pod
			waitUntil(ctx, t, "the main to exit", func(ctx context.Context) (bool, error) {
				list, err := suite.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) != 1 {
					return false, err
				}
				pod = &list.Items[0]
				m := containerStatus(pod, "main")
				return m != nil && m.State.Terminated != nil, nil
			})
			waitForEvent(ctx, t, pod, "Warning "+decision.ReasonNoTerminationPath)
			pod, err := suite.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if img := containerImage(pod, "sidecar"); img != workloadImage {
				t.Errorf("sidecar image is %s, want it untouched", img)
			}
			if s := containerStatus(pod, "sidecar"); s == nil || s.State.Running == nil || pod.Status.Phase != corev1.PodRunning {
				t.Errorf("pod %s, sidecar %+v: want Running with the sidecar running", pod.Status.Phase, s)
			}
			checkWrites(t, ns, nil)
			return ctx
		}).Feature()
}

// ignoreExitCodeSettles: the sidecar would exit 1 on SIGTERM; with
// KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE the controller settles the
// phase from the mains first (Succeeded, condition SidecarTerminated).
func ignoreExitCodeSettles() features.Feature {
	const name = "ignore-exit-code"
	js := jobSpec{name: name, policy: corev1.RestartPolicyNever, main: mainFor(1, 0),
		sidecar: sidecarExit(1), sidecarEnv: []corev1.EnvVar{envImage, envIgnore}}
	return features.New(name).WithLabel("path", "settle-phase").
		Assess("pod Succeeded with SidecarTerminated; job Complete", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns := newNamespace(ctx, t, name)
			obs := runJob(ctx, t, ns, js, 2*time.Minute)
			if got := jobFinished(obs.job); got != batchv1.JobComplete {
				t.Fatalf("job ended %q, want Complete\n%s", got, describePods(obs))
			}
			pod := onlyPod(t, obs)
			if pod.Status.Phase != corev1.PodSucceeded || !decision.HasSidecarTerminatedCondition(pod) {
				t.Errorf("pod %s, conditions %+v: want Succeeded with %s=True", pod.Status.Phase, pod.Status.Conditions, decision.ConditionSidecarTerminated)
			}
			checkSwapOnlyAfterMainsDone(t, obs)
			return ctx
		}).Feature()
}

func onlyPod(t *testing.T, obs *observation) *corev1.Pod {
	t.Helper()
	pods := obs.pods()
	if len(pods) != 1 {
		t.Fatalf("want one pod, saw %d:\n%s", len(pods), describePods(obs))
	}
	for _, p := range pods {
		return p
	}
	return nil
}

func checkSucceededWithSwap(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("pod phase %s, want Succeeded", pod.Status.Phase)
	}
	if img := containerImage(pod, "sidecar"); img != quickExitImage {
		t.Errorf("sidecar image %s, want %s", img, quickExitImage)
	}
	for _, name := range []string{"main", "sidecar"} {
		s := containerStatus(pod, name)
		if s == nil || s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			t.Errorf("%s status %+v, want terminated with 0", name, s)
		}
	}
}

// checkSwapOnlyAfterMainsDone: every pod version that carries the swapped
// image shows the main terminated with 0 for good. Status only moves
// forward, so a swap issued earlier would show in some version.
func checkSwapOnlyAfterMainsDone(t *testing.T, obs *observation) {
	t.Helper()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, p := range obs.versions {
		if containerImage(p, "sidecar") != quickExitImage {
			continue
		}
		m := containerStatus(p, "main")
		if m == nil || m.State.Terminated == nil || m.State.Terminated.ExitCode != 0 {
			t.Errorf("pod %s (rv %s) has the swapped image while main is %+v", p.Name, p.ResourceVersion, m)
			return
		}
	}
}

func sawTerminated(obs *observation, container string, code int32) bool {
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, p := range obs.versions {
		if s := containerStatus(p, container); s != nil && s.State.Terminated != nil && s.State.Terminated.ExitCode == code {
			return true
		}
	}
	return false
}

func sawWaiting(obs *observation, container, reason string) bool {
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, p := range obs.versions {
		if s := containerStatus(p, container); s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == reason {
			return true
		}
	}
	return false
}

func checkWrites(t *testing.T, ns string, want []string) {
	t.Helper()
	got := controllerWrites(t, ns)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("controller writes in %s: %q, want %q", ns, got, want)
	}
}
