package cases

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// RestartAllContainers rules (KEP-5532, beta and on by default from
// Kubernetes 1.36) on a marked sidecar, on a node that runs kruise-daemon.
// A rule matching an exit a stop produces (0, 143, 137) would turn the stop
// into a restart of the whole pod, the finished main included: the sidecar
// gets a Warning and no stop at all. A rule matching only 42 does not block
// the stop: one CRR, and the Job completes.

func restartAllOn(codes ...int32) corev1.ContainerRestartRule {
	r := restartOn(codes...)
	r.Action = corev1.ContainerRestartRuleActionRestartAllContainers
	return r
}

// quietAfterWarning is how long, after the Warning, the pod is watched for a
// CRR, an image patch or a second run of the main. The controller acts in
// well under a second once the main is done (Main exit → CRR, local cluster).
const quietAfterWarning = 15 * time.Second

// RestartAllFeatures are the two rows on the real node.
func RestartAllFeatures() []features.Feature {
	unsafe := JobSpec{Name: "restart-all-143", RestartPolicy: never, Containers: []Container{
		Main("main", 2, 0),
		Sidecar("proxy", "exit:143", true).WithPolicy(corev1.ContainerRestartPolicyNever, restartAllOn(143))}}
	safe := JobSpec{Name: "restart-all-42", RestartPolicy: never, Containers: []Container{
		Main("main", 2, 0),
		Sidecar("proxy", "exit:0", true).WithPolicy(corev1.ContainerRestartPolicyNever, restartAllOn(42))}}
	return []features.Feature{
		features.New("RestartAllContainers on 143: never stopped").WithLabel("type", "job").
			Setup(createNamespaceAndJob(&unsafe)).
			Assess("a Warning, no CRR, no swap, and the main runs once", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
				cl := mustClients(t, cfg)
				pod := waitForMainExit(ctx, t, cl, unsafe.Namespace, unsafe.Name)
				if err := WaitForPodEvent(ctx, cl.Kube, pod, corev1.EventTypeWarning, decision.ReasonSidecarKillRestartsPod, time.Minute); err != nil {
					t.Fatal(err)
				}
				if err := sleep(ctx, quietAfterWarning); err != nil {
					t.Fatal(err)
				}
				pods, err := JobPods(ctx, cl.Kube, unsafe.Namespace, unsafe.Name)
				if err != nil || len(pods) != 1 {
					t.Fatalf("job pods %d (%v), want 1", len(pods), err)
				}
				p := &pods[0]
				crrs, err := CRRsForPod(ctx, cl.Dynamic, p.Namespace, p.Name)
				if err != nil || len(crrs) != 0 {
					t.Errorf("CRRs for %s: %d (%v), want none", p.Name, len(crrs), err)
				}
				if img := ContainerImage(p, "proxy"); img != unsafe.Containers[1].build().Image {
					t.Errorf("sidecar image %q: swapped", img)
				}
				m, _ := ContainerState(p, "main")
				s, _ := ContainerState(p, "proxy")
				if m.State.Terminated == nil || m.RestartCount != 0 || m.LastTerminationState.Terminated != nil {
					t.Errorf("main %+v: want exited once, never run again", m)
				}
				if s.State.Running == nil || s.RestartCount != 0 {
					t.Errorf("sidecar %+v: want still running, never stopped", s)
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.AllContainersRestarting && c.Status == corev1.ConditionTrue {
						t.Errorf("pod condition %s True: the pod is restarting in place", c.Type)
					}
				}
				t.Logf("%s: Warning %s, then %s with no CRR, no swap; main ran once; sidecar still running", p.Name, decision.ReasonSidecarKillRestartsPod, quietAfterWarning)
				return ctx
			}).
			Teardown(deleteNamespace(&unsafe)).Feature(),
		features.New("RestartAllContainers on 42 only: stopped").WithLabel("type", "job").
			Setup(createNamespaceAndJob(&safe)).
			Assess("one CRR, and the Job completes with the main run once", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
				want := Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 0}, CRRContainers: []string{"proxy"}, Event: true}
				obs := RunAndCheck(ctx, t, mustClients(t, cfg), safe.Namespace, safe.Name, 4*time.Minute, want)
				obs.checkRestartsThenOneCRR(t, "main", 0)
				return ctx
			}).
			Teardown(deleteNamespace(&safe)).Feature(),
	}
}

// waitForMainExit waits for the Job's one pod to show its main terminated.
func waitForMainExit(ctx context.Context, t *testing.T, cl Clients, ns, job string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := JobPods(ctx, cl.Kube, ns, job)
		if err != nil || len(pods) == 0 {
			return false, nil
		}
		if s, ok := ContainerState(&pods[0], "main"); ok && s.State.Terminated != nil {
			pod = &pods[0]
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("job %s/%s: the main did not exit: %v", ns, job, err)
	}
	return pod
}
