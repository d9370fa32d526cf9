package cases

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/virtualnode"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/virtualnode/provider"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// ProfileNodes are the mock nodes a suite runs for ProviderProfileFeatures,
// as mock-node's --nodes entries (name=profile).
var ProfileNodes = []string{"eci-1=eci", "aci-1=aci", "vkmock-1=vk-mock"}

// OnProfile pins a Job's pod to the mock node playing the profile.
func OnProfile(j *batchv1.Job, p provider.Profile) *batchv1.Job {
	pod := &j.Spec.Template.Spec
	pod.NodeSelector = map[string]string{VirtualNodeLabelKey: VirtualNodeLabelValue, virtualnode.ProfileKey: string(p)}
	pod.Tolerations = append(pod.Tolerations,
		corev1.Toleration{Key: VirtualNodeTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: virtualnode.ProfileKey, Operator: corev1.TolerationOpEqual, Value: string(p), Effect: corev1.TaintEffectNoSchedule})
	return j
}

// profileOutcome is what a Job on a profile's node came to, timed from the
// first poll that saw the main terminated (polls every 100 ms).
type profileOutcome struct {
	pod      *corev1.Pod
	mainDone time.Time
	ended    time.Duration // until the pod's phase was terminal; 0: it never was
	warning  time.Duration // until the Warning was seen; 0: none
}

// watchProfileJob creates the Job and polls its pod until its phase is
// terminal and, when warn is set, a Warning with that reason is on it.
func watchProfileJob(ctx context.Context, cl Clients, job *batchv1.Job, warn string, timeout time.Duration) (profileOutcome, error) {
	var o profileOutcome
	ns := job.Namespace
	if _, err := cl.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return o, err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		o.pod = &list.Items[0]
		if _, done := ExitCode(o.pod, VirtualMain); done && o.mainDone.IsZero() {
			o.mainDone = time.Now()
		}
		if o.mainDone.IsZero() {
			return false, nil
		}
		if p := o.pod.Status.Phase; o.ended == 0 && (p == corev1.PodSucceeded || p == corev1.PodFailed) {
			o.ended = time.Since(o.mainDone)
		}
		if warn != "" && o.warning == 0 {
			if evs, _ := PodEvents(ctx, cl.Kube, ns, o.pod.Name, warn); len(evs) > 0 {
				o.warning = time.Since(o.mainDone)
			}
		}
		return (warn == "" || o.warning > 0) && (o.ended > 0 || warn == decision.ReasonQuickExitNotRunning), nil
	})
	return o, err
}

// ProviderProfileFeatures run one Job with a sidecar marked with a
// quick-exit image on each provider profile's node and check the outcome
// docs/platforms.md promises there, logging the controller's writes and the
// time from the main's exit:
//   - eci: the swap, the Job Complete, one write;
//   - aci: no swap (the provider ignores it); the phase settled Succeeded
//     from the main with a SidecarLeftRunning Warning, the Job Complete,
//     and the sidecar still running on the node;
//   - vk-mock: the swap is written, the provider ignores it, and a
//     QuickExitImageNotRunning Warning names the image the node still runs.
func ProviderProfileFeatures(env VirtualNodeEnv) []features.Feature {
	sidecar := Sidecar(VirtualSidecar, "exit:0", false).With(EnvWhenJobExitWithImage, images.QuickExit.Ref)
	type profileCase struct {
		profile  provider.Profile
		warn     string
		phase    corev1.PodPhase
		image    string // the sidecar's image in the spec at the end
		running  bool   // the sidecar still runs at the end
		writes   func(pod string) []string
		platform decision.Platform
	}
	swapOnly := func(pod string) []string { return []string{"patch pods " + pod + " 200"} }
	rows := []profileCase{
		{profile: provider.ProfileECI, phase: corev1.PodSucceeded, image: images.QuickExit.Ref, writes: swapOnly, platform: decision.PlatformAlibabaECI},
		{profile: provider.ProfileACI, warn: decision.ReasonSidecarLeftRunning, phase: corev1.PodSucceeded, image: images.Workload.Ref, running: true,
			writes: func(pod string) []string {
				return []string{"patch pods/status " + pod + " 200", "patch pods " + pod + " 200"}
			}, platform: decision.PlatformAzureACI},
		{profile: provider.ProfileVKMock, warn: decision.ReasonQuickExitNotRunning, phase: corev1.PodRunning, image: images.QuickExit.Ref, running: true,
			writes: swapOnly, platform: decision.PlatformVirtualKubelet},
	}
	var out []features.Feature
	for _, row := range rows {
		js := VirtualJob("profile-"+string(row.profile), never, Main(VirtualMain, 2, 0), sidecar)
		out = append(out, features.New(js.Name).WithLabel("type", "virtual").WithLabel("profile", string(row.profile)).
			Setup(createNamespace(&js)).
			Assess(fmt.Sprintf("%s node (%s): the outcome the platform table promises", row.profile, row.platform), func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
				if got := row.profile.Platform(); got != row.platform {
					t.Fatalf("profile %s's node is recognised as %s, want %s", row.profile, got, row.platform)
				}
				cl := mustClients(t, cfg)
				o, err := watchProfileJob(ctx, cl, OnProfile(js.Build(), row.profile), row.warn, env.Timeout)
				if err != nil {
					t.Fatalf("%v (pod %+v)", err, o.pod)
				}
				pod, err := cl.Kube.CoreV1().Pods(js.Namespace).Get(ctx, o.pod.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if pod.Status.Phase != row.phase {
					t.Errorf("pod phase %s, want %s", pod.Status.Phase, row.phase)
				}
				if img := ContainerImage(pod, VirtualSidecar); img != row.image {
					t.Errorf("sidecar spec image %s, want %s", img, row.image)
				}
				if s, ok := ContainerState(pod, VirtualSidecar); !ok || (s.State.Running != nil) != row.running {
					t.Errorf("sidecar status %+v, want running=%t", s.State, row.running)
				}
				if img := ContainerImage(pod, VirtualMain); img != images.Workload.Ref {
					t.Errorf("main container's image changed to %q", img)
				}
				if row.phase != corev1.PodRunning {
					var job *batchv1.Job
					err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
						job, err = cl.Kube.BatchV1().Jobs(js.Namespace).Get(ctx, js.Name, metav1.GetOptions{})
						return err == nil && JobFinished(job) != "", nil
					})
					if err != nil || JobFinished(job) != batchv1.JobComplete {
						t.Errorf("job %s did not complete: %v", js.Name, err)
					}
				}
				var writes []string
				if env.ControllerWrites != nil {
					writes = env.ControllerWrites(t, js.Namespace)
					env.checkWrites(t, js.Namespace, row.writes(pod.Name))
				}
				t.Logf("profile %s (platform %s): phase %s after %s from the main's exit, Warning %q after %s, %d controller writes %q",
					row.profile, row.platform, pod.Status.Phase, o.ended.Round(10*time.Millisecond), row.warn, o.warning.Round(10*time.Millisecond), len(writes), writes)
				return ctx
			}).
			Teardown(deleteNamespace(&js)).Feature())
	}
	return out
}
