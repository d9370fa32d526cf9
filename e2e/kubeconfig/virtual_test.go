package kubeconfig

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// The mock node (kind/mock-node) labels and taints its nodes as
// virtual-kubelet providers do.
const (
	envWithImage    = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE"
	virtualLabelKey = "type"
	virtualLabelVal = "virtual-kubelet"
	virtualTaintKey = "virtual-kubelet.io/provider"
)

// onVirtualNode pins a Job's pod to the mock virtual node.
func onVirtualNode(j *batchv1.Job) *batchv1.Job {
	pod := &j.Spec.Template.Spec
	pod.NodeSelector = map[string]string{virtualLabelKey: virtualLabelVal}
	pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Key: virtualTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	return j
}

func virtualNodeFeatures() []features.Feature {
	return []features.Feature{
		virtualJobFeature("Virtual node, sidecar with a quick-exit image: swapped in place, Job Complete",
			cases.JobSpec{Name: "virtual-swap", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []cases.Container{cases.Main("main", 2, 0), cases.Sidecar("proxy", "exit:0", false).With(envWithImage, images.QuickExit.Ref)}},
			cases.Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 0}, Event: true},
			images.QuickExit.Ref),
		virtualJobFeature("Virtual node, main exits 2: sidecar still swapped, Job Failed",
			cases.JobSpec{Name: "virtual-fail", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []cases.Container{cases.Main("main", 2, 2), cases.Sidecar("proxy", "exit:0", false).With(envWithImage, images.QuickExit.Ref)}},
			cases.Expect{Job: batchv1.JobFailed, Phase: corev1.PodFailed, ExitCodes: map[string]int32{"main": 2, "proxy": 0}, Event: true},
			images.QuickExit.Ref),
	}
}

// virtualJobFeature runs js on the virtual node and checks want, plus that
// the sidecar's image was swapped to swapped (no CRR can act there).
func virtualJobFeature(name string, js cases.JobSpec, want cases.Expect, swapped string) features.Feature {
	js.Namespace = cases.Name("e2e", js.Name)
	return features.New(name).
		WithLabel("type", "virtual").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl, err := cases.ClientsFrom(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := cases.CreateNamespace(ctx, cl.Kube, js.Namespace); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Kube.BatchV1().Jobs(js.Namespace).Create(ctx, onVirtualNode(js.Build()), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create job %s: %v", js.Name, err)
			}
			return ctx
		}).
		Assess("sidecar swapped to the quick-exit image, Job ends as expected", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl, err := cases.ClientsFrom(cfg)
			if err != nil {
				t.Fatal(err)
			}
			obs, err := cases.RunToEnd(ctx, cl, js.Namespace, js.Name, 3*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			obs.Check(t, want)
			if obs.Pod != nil {
				for _, c := range obs.Pod.Spec.Containers {
					if c.Name == "proxy" && c.Image != swapped {
						t.Errorf("sidecar image %q, want %q", c.Image, swapped)
					}
					if c.Name == "main" && c.Image != images.Workload.Ref {
						t.Errorf("main container's image changed to %q", c.Image)
					}
				}
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl, err := cases.ClientsFrom(cfg)
			if err == nil {
				bg := metav1.DeletePropagationBackground
				_ = cl.Kube.CoreV1().Namespaces().Delete(ctx, js.Namespace, metav1.DeleteOptions{PropagationPolicy: &bg})
			}
			return ctx
		}).Feature()
}
