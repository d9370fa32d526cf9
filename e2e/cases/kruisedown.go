package cases

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// KruiseControl stops OpenKruise's kruise-manager and starts it again.
type KruiseControl interface {
	StopKruiseManager(ctx context.Context) (restart func(context.Context) error, err error)
}

// KruiseManagerDownFeature: kruise-manager is down, so its CRR webhook
// (failurePolicy Fail) answers every CRR create with a 500. Each refused
// CRR is a failed kill with a SidecarKillFailed Warning naming the answer;
// a sidecar whose quick-exit image is known is swapped instead and its Job
// completes while kruise-manager is still down; the others are retried with
// backoff and complete through a CRR once kruise-manager is back.
//
// The namespace carries the label control-plane: kruise's pod webhooks
// (mpod.kb.io on CREATE, vpod.kb.io on UPDATE, both failurePolicy Fail)
// skip such namespaces (kruise v1.9.1 config/webhook/patch_manifests.yaml).
// Elsewhere, with kruise-manager down, pods could be neither created nor
// re-imaged: the swap would be refused with a 500 too, and every pod would
// wait for kruise-manager like the CRR-only ones here.
func KruiseManagerDownFeature(ctl KruiseControl, perKind int) *features.FeatureBuilder {
	ns := "e2e-kruise-down"
	var restart func(context.Context) error
	restartOnce := func(ctx context.Context, t *testing.T) {
		if restart == nil {
			return
		}
		r := restart
		restart = nil
		if err := r(ctx); err != nil {
			t.Fatalf("start kruise-manager again: %v", err)
		}
	}
	job := func(name string, sidecar Container) *batchv1.Job {
		js := JobSpec{Name: name, Namespace: ns, RestartPolicy: never, Containers: []Container{Main("main", 2, 0), sidecar}}
		return js.Build()
	}
	return features.New("kruise-manager down: swaps where an image is known, Warnings and a CRR once it is back for the rest").
		WithLabel("type", "chaos").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			if _, err := cl.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: ns, Labels: map[string]string{"control-plane": "e2e"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := CreateNamespace(ctx, cl.Kube, ns); err != nil { // waits for its ServiceAccount
				t.Fatal(err)
			}
			var err error
			if restart, err = ctl.StopKruiseManager(ctx); err != nil {
				t.Fatalf("stop kruise-manager: %v", err)
			}
			for i := range perKind {
				withImage := Sidecar("proxy", "exit:0", true).With(EnvWhenJobExitWithImage, images.QuickExit.Ref)
				for _, j := range []*batchv1.Job{job(fmt.Sprintf("swap-%d", i), withImage), job(fmt.Sprintf("crr-%d", i), Sidecar("proxy", "exit:0", true))} {
					if _, err := cl.Kube.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
						t.Fatalf("create job %s: %v", j.Name, err)
					}
				}
			}
			return ctx
		}).
		Assess("while it is down, the swap Jobs complete and the CRR-only pods carry a Warning", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			for i := range perKind {
				obs, err := RunToEnd(ctx, cl, ns, fmt.Sprintf("swap-%d", i), 3*time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				checkJobAndExits(t, obs, Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 0}})
				if img := ContainerImage(obs.Pod, "proxy"); img != images.QuickExit.Ref {
					t.Errorf("pod %s: proxy image %s, want the quick-exit image", obs.Pod.Name, img)
				}
				if len(obs.CRRs) > 0 {
					t.Errorf("pod %s: CRRs %v exist although kruise-manager was down", obs.Pod.Name, obs.CRRs)
				}
				checkRefusedWith500(ctx, t, cl, obs.Pod)
			}
			for i := range perKind {
				pods, err := JobPods(ctx, cl.Kube, ns, fmt.Sprintf("crr-%d", i))
				if err != nil || len(pods) != 1 {
					t.Fatalf("pods of crr-%d: %d, %v", i, len(pods), err)
				}
				checkRefusedWith500(ctx, t, cl, &pods[0])
				j, err := cl.Kube.BatchV1().Jobs(ns).Get(ctx, fmt.Sprintf("crr-%d", i), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if f := JobFinished(j); f != "" {
					t.Errorf("job crr-%d %s while kruise-manager was down", i, f)
				}
			}
			return ctx
		}).
		Assess("once it is back, the CRR-only Jobs complete through one CRR each", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			restartOnce(ctx, t)
			cl := mustClients(t, cfg)
			for i := range perKind {
				// The retries back off (5 s, doubling): the next one after
				// kruise-manager is back is at most a minute or two away.
				RunAndCheck(ctx, t, cl, ns, fmt.Sprintf("crr-%d", i), 4*time.Minute, Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded,
					ExitCodes: map[string]int32{"main": 0, "proxy": 0}, CRRContainers: []string{"proxy"}, Event: true})
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			restartOnce(ctx, t) // whatever failed above, kruise-manager runs again
			js := JobSpec{Namespace: ns}
			return deleteNamespace(&js)(ctx, t, cfg)
		})
}

// checkRefusedWith500 waits for the pod's SidecarKillFailed Warning and
// checks that it names the webhook's 500.
func checkRefusedWith500(ctx context.Context, t *testing.T, cl Clients, pod *corev1.Pod) {
	t.Helper()
	if err := WaitForPodEvent(ctx, cl.Kube, pod, corev1.EventTypeWarning, decision.ReasonSidecarKillFailed, eventWait); err != nil {
		t.Error(err)
		return
	}
	evs, err := PodEvents(ctx, cl.Kube, pod.Namespace, pod.Name, decision.ReasonSidecarKillFailed)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.Contains(e.Message, "HTTP 500") {
			return
		}
	}
	t.Errorf("pod %s: no SidecarKillFailed Warning names HTTP 500: %v", pod.Name, evs)
}
