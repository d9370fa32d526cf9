package cases

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

// Virtual-kubelet nodes (the mock node of e2e/virtualnode, on the local
// control plane or deployed by kind/mock-node) carry this label and taint,
// as serverless providers' nodes do. They run no kruise-daemon: the
// controller stops a sidecar there by swapping its image.
const (
	VirtualNodeLabelKey   = "type"
	VirtualNodeLabelValue = "virtual-kubelet"
	VirtualNodeTaintKey   = "virtual-kubelet.io/provider"
)

// UnpullableImage is a sidecar image no registry serves: a virtual node
// never pulls it (the mock node's --unpullable may name it too).
const UnpullableImage = "registry.invalid/sidecar-terminator/never-pulls:1"

// What else the controller writes, by contract.
const (
	ReasonNoTerminationPath                            = "NoTerminationPath"
	ConditionSidecarTerminated corev1.PodConditionType = "SidecarTerminated"
)

// The containers of the virtual-node Jobs (VirtualJob).
const (
	VirtualMain    = "main"
	VirtualSidecar = "sidecar"
)

// eventTimeout bounds the wait for an event the controller records after
// its write.
const eventTimeout = 90 * time.Second

// OnVirtualNode pins a Job's pod to the virtual nodes: their label as
// nodeSelector and a toleration of their taint.
func OnVirtualNode(j *batchv1.Job) *batchv1.Job {
	pod := &j.Spec.Template.Spec
	pod.NodeSelector = map[string]string{VirtualNodeLabelKey: VirtualNodeLabelValue}
	pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Key: VirtualNodeTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	return j
}

// VirtualNodeEnv is what a suite tells the virtual-node features about its
// cluster beyond the API.
type VirtualNodeEnv struct {
	// Timeout for each Job to finish.
	Timeout time.Duration
	// ControllerWrites lists the mutating requests the controller's
	// identity made in namespace ns, events aside, as "verb resource[/sub]
	// name code" (from the API server's audit log). nil where the suite has
	// no audit log: the features then do not check that the controller
	// wrote exactly what the case expects (they still check no CRR exists).
	ControllerWrites func(t *testing.T, ns string) []string
}

// VirtualNodeFeatures are the image-swap cases: each one Job pinned to the
// virtual nodes, in its own namespace.
func VirtualNodeFeatures(env VirtualNodeEnv) []features.Feature {
	withImage := Sidecar(VirtualSidecar, "exit:0", false).With(EnvWhenJobExitWithImage, images.QuickExit.Ref)
	unpulled := withImage
	unpulled.Image = UnpullableImage
	return append([]features.Feature{
		env.swapFeature(VirtualJob("never-with-image", never, Main(VirtualMain, 2, 0), withImage), batchv1.JobComplete),
		env.swapFeature(VirtualJob("onfailure-with-image", onFailure, Main(VirtualMain, 2, 0), withImage), batchv1.JobComplete),
		// On a virtual node the CRR path does not exist, so a sidecar marked
		// for both is swapped, not recreated.
		env.swapFeature(VirtualJob("both-envs", never, Main(VirtualMain, 2, 0), withImage.With(EnvWhenJobExit, "true")), batchv1.JobComplete),
		// The sidecar never pulled: it cannot be signalled, but a new image
		// makes the node pull and run the quick-exit image instead.
		env.swapFeature(VirtualJob("unpulled-sidecar", never, Main(VirtualMain, 2, 0), unpulled), batchv1.JobComplete),
		env.mainFailsFeature(withImage),
		env.onFailureMainRestartsBeforeSwap(withImage),
		env.plainEnvWarns(),
		env.ignoreExitCodeSettles(),
	}, append(env.stopOrderSwaps(), env.restartRuleFeatures(withImage)...)...)
}

// VirtualJob is a Job of one main and one sidecar for the virtual nodes
// (build it through OnVirtualNode), in namespace e2e-<name>, its pods
// labelled case=<name>, retried up to 6 times.
func VirtualJob(name string, policy corev1.RestartPolicy, main, sidecar Container) JobSpec {
	backoff := int32(6)
	return JobSpec{Name: name, Namespace: Name("e2e", name), RestartPolicy: policy,
		Containers: []Container{main, sidecar}, GracePeriodSeconds: 3, BackoffLimit: &backoff,
		Labels: map[string]string{"case": name}}
}

// virtualRun is one finished Job of a virtual-node feature.
type virtualRun struct {
	*WatchedRun
	cl  Clients
	pod *corev1.Pod
}

// jobFeature runs js on the virtual nodes to its end: the Job must end
// with want, through exactly one pod and without any CRR; check asserts the
// rest.
func (env VirtualNodeEnv) jobFeature(js JobSpec, path, assess string, want batchv1.JobConditionType,
	check func(ctx context.Context, t *testing.T, r *virtualRun)) features.Feature {
	return features.New(js.Name).WithLabel("type", "virtual").WithLabel("path", path).
		Setup(createNamespace(&js)).
		Assess(assess, func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			run, err := RunWatched(ctx, cl, OnVirtualNode(js.Build()), env.Timeout)
			if err != nil {
				t.Fatal(err)
			}
			if got := JobFinished(run.Job); got != want {
				t.Fatalf("job ended %q, want %q\n%s", got, want, run.Describe())
			}
			r := &virtualRun{WatchedRun: run, cl: cl, pod: run.OnlyPod(t)}
			if len(run.CRRs) > 0 {
				t.Errorf("CRRs %v created on a virtual node, want none", run.CRRs)
			}
			check(ctx, t, r)
			return ctx
		}).
		Teardown(deleteNamespace(&js)).Feature()
}

// swapFeature: the Job ends with want (Complete: every container exited 0)
// through one image swap, issued after the main had exited.
func (env VirtualNodeEnv) swapFeature(js JobSpec, want batchv1.JobConditionType) features.Feature {
	return env.jobFeature(js, "image-swap", "job completes through one image swap", want, func(ctx context.Context, t *testing.T, r *virtualRun) {
		env.checkSwapped(ctx, t, r, corev1.PodSucceeded, 0)
		for _, c := range js.Containers {
			if c.Image == UnpullableImage && !r.SawWaiting(c.Name, "ErrImagePull") {
				t.Errorf("the %s was never seen waiting in ErrImagePull", c.Name)
			}
		}
	})
}

// mainFailsFeature: a main that exits 2 under Never is done: the sidecar
// is still swapped, and the pod and the Job fail on the main's code.
func (env VirtualNodeEnv) mainFailsFeature(sidecar Container) features.Feature {
	js := VirtualJob("never-main-fails", never, Main(VirtualMain, 2, 2), sidecar)
	js.BackoffLimit = nil // the first failed pod fails the Job
	return env.jobFeature(js, "image-swap", "sidecar swapped after the main failed; Job Failed", batchv1.JobFailed, func(ctx context.Context, t *testing.T, r *virtualRun) {
		env.checkSwapped(ctx, t, r, corev1.PodFailed, 2)
	})
}

// onFailureMainRestartsBeforeSwap: under OnFailure a main that exits 1 is
// restarted by the node; the controller must wait. The main fails twice,
// then succeeds; the sidecar is swapped only after that.
func (env VirtualNodeEnv) onFailureMainRestartsBeforeSwap(sidecar Container) features.Feature {
	main := Main(VirtualMain, 1, 0)
	main.ExitCodeScript = "1,1,0"
	js := VirtualJob("onfailure-main-fails-twice", onFailure, main, sidecar)
	return env.jobFeature(js, "image-swap", "no swap while the main restarts; one swap after it succeeds", batchv1.JobComplete, func(ctx context.Context, t *testing.T, r *virtualRun) {
		if m, ok := ContainerState(r.pod, VirtualMain); !ok || m.RestartCount != 2 {
			t.Errorf("main status %+v, want 2 restarts", m)
		}
		if !r.SawTerminated(VirtualMain, 1) {
			t.Errorf("the main was never seen terminated with exit 1: the case did not test the wait")
		}
		env.checkSwapped(ctx, t, r, corev1.PodSucceeded, 0)
	})
}

// ignoreExitCodeSettles: the sidecar would exit 1 on SIGTERM; with
// KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE the controller settles the
// phase from the mains first (Succeeded, condition SidecarTerminated).
func (env VirtualNodeEnv) ignoreExitCodeSettles() features.Feature {
	sidecar := Sidecar(VirtualSidecar, "exit:1", false).With(EnvWhenJobExitWithImage, images.QuickExit.Ref).With(EnvIgnoreExitCode, "true")
	js := VirtualJob("ignore-exit-code", never, Main(VirtualMain, 1, 0), sidecar)
	return env.jobFeature(js, "settle-phase", "pod Succeeded with SidecarTerminated; job Complete", batchv1.JobComplete, func(ctx context.Context, t *testing.T, r *virtualRun) {
		if r.pod.Status.Phase != corev1.PodSucceeded || !hasCondition(r.pod, ConditionSidecarTerminated) {
			t.Errorf("pod %s, conditions %+v: want Succeeded with %s=True", r.pod.Status.Phase, r.pod.Status.Conditions, ConditionSidecarTerminated)
		}
		r.CheckSwapOnlyAfterMainDone(t, VirtualSidecar, images.QuickExit.Ref, VirtualMain, 0)
	})
}

// checkSwapped: the pod ended in phase with the main's exit code mainExit
// and the sidecar's 0; the sidecar runs the quick-exit image and the main
// its own; no pod version had the swapped image before the main was done;
// the pod has a Normal SidecarTerminating event; and where the suite
// audits, the controller wrote exactly one thing in the namespace: the
// image patch.
func (env VirtualNodeEnv) checkSwapped(ctx context.Context, t *testing.T, r *virtualRun, phase corev1.PodPhase, mainExit int32) {
	t.Helper()
	pod := r.pod
	if pod.Status.Phase != phase {
		t.Errorf("pod phase %s, want %s", pod.Status.Phase, phase)
	}
	if img := ContainerImage(pod, VirtualSidecar); img != images.QuickExit.Ref {
		t.Errorf("sidecar image %s, want %s", img, images.QuickExit.Ref)
	}
	if img := ContainerImage(pod, VirtualMain); img != images.Workload.Ref {
		t.Errorf("main container's image changed to %q", img)
	}
	for name, code := range map[string]int32{VirtualMain: mainExit, VirtualSidecar: 0} {
		if got, ok := ExitCode(pod, name); !ok || got != code {
			s, _ := ContainerState(pod, name)
			t.Errorf("%s status %+v, want terminated with %d", name, s, code)
		}
	}
	r.CheckSwapOnlyAfterMainDone(t, VirtualSidecar, images.QuickExit.Ref, VirtualMain, mainExit)
	if err := WaitForPodEvent(ctx, r.cl.Kube, pod, corev1.EventTypeNormal, ReasonSidecarTerminating, eventTimeout); err != nil {
		t.Error(err)
	}
	env.checkWrites(t, pod.Namespace, []string{"patch pods " + pod.Name + " 200"})
}

// plainEnvWarns: on a virtual node, a sidecar marked only with the plain
// env has no way to be stopped (no kruise-daemon, no image): a Warning, and
// the pod is left alone.
func (env VirtualNodeEnv) plainEnvWarns() features.Feature {
	js := VirtualJob("plain-env-only", never, Main(VirtualMain, 1, 0), Sidecar(VirtualSidecar, "exit:0", true))
	return features.New(js.Name).WithLabel("type", "virtual").WithLabel("path", "none").
		Setup(createNamespace(&js)).
		Assess("a Warning and nothing else", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			ns := js.Namespace
			if _, err := cl.Kube.BatchV1().Jobs(ns).Create(ctx, OnVirtualNode(js.Build()), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var pod *corev1.Pod
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
				list, err := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) != 1 {
					return false, err
				}
				pod = &list.Items[0]
				_, done := ExitCode(pod, VirtualMain)
				return done, nil
			})
			if err != nil {
				t.Fatalf("waiting for the main to exit: %v", err)
			}
			if err := WaitForPodEvent(ctx, cl.Kube, pod, corev1.EventTypeWarning, ReasonNoTerminationPath, eventTimeout); err != nil {
				t.Fatal(err)
			}
			pod, err = cl.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if img := ContainerImage(pod, VirtualSidecar); img != images.Workload.Ref {
				t.Errorf("sidecar image is %s, want it untouched", img)
			}
			if s, ok := ContainerState(pod, VirtualSidecar); !ok || s.State.Running == nil || pod.Status.Phase != corev1.PodRunning {
				t.Errorf("pod %s, sidecar %+v: want Running with the sidecar running", pod.Status.Phase, s)
			}
			if crrs, err := CRRsForPod(ctx, cl.Dynamic, ns, pod.Name); err != nil || len(crrs) > 0 {
				t.Errorf("CRRs for the pod: %d (%v), want none", len(crrs), err)
			}
			env.checkWrites(t, ns, nil)
			return ctx
		}).
		Teardown(deleteNamespace(&js)).Feature()
}

// stopOrderSwaps: the stop order on a virtual node, where each stage is an
// image swap: the shipper is swapped first and delivers its last line
// through the proxy, which is swapped only once the shipper has exited; one
// patch each. Without the order both are swapped in one patch and stopped
// together: the line is lost and the shipper's stopped instance exits 3.
// The kubelet starts the quick-exit image in the same sync as it kills the
// old instance, so the pod still succeeds on the quick-exit images' 0: the
// lost line shows only in the shipper's last state.
func (env VirtualNodeEnv) stopOrderSwaps() []features.Feature {
	swapped := func(c Container) Container { return c.With(EnvWhenJobExitWithImage, images.QuickExit.Ref) }
	proxy, shipper := shipperAndProxy()
	proxy, shipper = swapped(proxy), swapped(shipper)
	build := func(name string, order bool) JobSpec {
		js := VirtualJob(name, never, Main(VirtualMain, 2, 0), proxy)
		js.Containers = append(js.Containers, shipper)
		if order {
			js.Annotations = map[string]string{decision.AnnotationStopOrder: "shipper,proxy"}
		} else {
			js.BackoffLimit = new(int32) // one pod: its failure is the case
		}
		return js
	}
	check := func(wantShipper int32, writes int) func(ctx context.Context, t *testing.T, r *virtualRun) {
		return func(ctx context.Context, t *testing.T, r *virtualRun) {
			for _, c := range []string{"proxy", "shipper"} {
				if img := ContainerImage(r.pod, c); img != images.QuickExit.Ref {
					t.Errorf("%s image %s, want %s", c, img, images.QuickExit.Ref)
				}
				r.CheckSwapOnlyAfterMainDone(t, c, images.QuickExit.Ref, VirtualMain, 0)
			}
			// The instance the swap stopped: the last one when the
			// quick-exit instance ran after it, else the current one.
			s, _ := ContainerState(r.pod, "shipper")
			stopped := s.LastTerminationState.Terminated
			if stopped == nil {
				stopped = s.State.Terminated
			}
			if stopped == nil || stopped.ExitCode != wantShipper {
				t.Errorf("shipper's stopped instance: %+v, want exit %d", stopped, wantShipper)
			}
			want := make([]string, writes)
			for i := range want {
				want[i] = "patch pods " + r.pod.Name + " 200"
			}
			env.checkWrites(t, r.pod.Namespace, want)
		}
	}
	ordered := func(ctx context.Context, t *testing.T, r *virtualRun) {
		check(0, 2)(ctx, t, r)
		r.CheckSwapOnlyAfterMainDone(t, "proxy", images.QuickExit.Ref, "shipper", 0)
	}
	return []features.Feature{
		env.jobFeature(build("stop-order-swaps", true), "image-swap", "the shipper is swapped first and delivers; the proxy once the shipper exited",
			batchv1.JobComplete, ordered),
		env.jobFeature(build("no-stop-order-swaps", false), "image-swap", "both swapped at once: the shipper's last line is lost (its stopped instance exits 3), the pod succeeds on the quick-exit images",
			batchv1.JobComplete, check(spec.ExitLost, 1)),
	}
}

// checkWrites: the controller's writes in ns are exactly want, in any
// order; nothing to check where the suite has no audit log.
func (env VirtualNodeEnv) checkWrites(t *testing.T, ns string, want []string) {
	t.Helper()
	if env.ControllerWrites == nil {
		return
	}
	got := env.ControllerWrites(t, ns)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("controller writes in %s: %q, want %q", ns, got, want)
	}
}
