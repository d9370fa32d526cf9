package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kruisetest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

const defaultQuickExit = "ghcr.io/sidecar-terminator/quick-exit:default"

// withDefaultImage restarts the fixture's reconciler with the operator's
// default quick-exit image, and without the CRR API unless crrAPI.
func (f *fixture) withDefaultImage(crrAPI bool, pods []*corev1.Pod, nodes map[string]map[string]string) {
	if !crrAPI {
		scheme := runtime.NewScheme()
		metav1.AddMetaToScheme(scheme)
		caches, err := NewCaches(f.client, metadatafake.NewSimpleMetadataClient(scheme), f.kruise, false)
		if err != nil {
			f.t.Fatal(err)
		}
		f.caches = caches
		for _, p := range pods {
			f.setPod(p)
		}
		for name, l := range nodes {
			caches.NodeInformer.GetIndexer().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
		}
	}
	cfg := reconciler.DefaultConfig()
	cfg.Policy.DefaultQuickExitImage = defaultQuickExit
	f.rec = reconciler.New(cfg, f.caches, Writer{Client: f.client, Kruise: f.kruise}, Writer{Client: f.client, Kruise: f.kruise}, f.events, f.metrics, f.clock)
}

func sidecarImage(t *testing.T, f *fixture, name string) string {
	t.Helper()
	pod, err := f.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Spec.Containers[1].Image
}

// A cluster without OpenKruise: a plain-env pod (KRUISE_..._WHEN_JOB_EXIT,
// no image of its own) on a normal node gets the operator's default image
// through one pod patch, and no CRR.
func TestDefaultImageWithoutOpenKruise(t *testing.T) {
	pod := jobPod("job-d", podtest.Env(decision.EnvTerminate, "true")).Namespace("default").Node("node-1").Build()
	f := newFixture(t, []*corev1.Pod{pod}, normalNode)
	f.withDefaultImage(false, []*corev1.Pod{pod}, normalNode)
	writes := f.sync("job-d")
	if len(writes) != 1 || writes[0].GetVerb() != "patch" || writes[0].GetResource().Resource != "pods" {
		t.Fatalf("want one pod patch, got %v", writes)
	}
	if img := sidecarImage(t, f, "job-d"); img != defaultQuickExit {
		t.Fatalf("sidecar image after the swap: %s, want the default %s", img, defaultQuickExit)
	}
}

// With OpenKruise whose webhook refuses the CRR (the KruiseDaemon feature
// gate off: 403), the refused CRR is a failed kill and the default image is
// swapped in within the same sync; where the CRR is admitted, it is not.
func TestDefaultImageAfterARefusedCRR(t *testing.T) {
	for name, refuse := range map[string]bool{"refused": true, "admitted": false} {
		t.Run(name, func(t *testing.T) {
			pod := jobPod("job-r", podtest.Env(decision.EnvTerminate, "true")).Namespace("default").Node("node-1").Build()
			f := newFixture(t, []*corev1.Pod{pod}, normalNode)
			f.withDefaultImage(true, nil, nil)
			if refuse {
				f.kruise.PrependReactor("create", "containerrecreaterequests", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, kruisetest.FeatureGateOff()
				})
			}
			writes := f.sync("job-r")
			// The fixture lists the pod client's writes before kruise's.
			var verbs []string
			for _, w := range writes {
				verbs = append(verbs, w.GetVerb()+" "+w.GetResource().Resource)
			}
			img := sidecarImage(t, f, "job-r")
			switch {
			case refuse && (len(writes) != 2 || verbs[0] != "patch pods" || verbs[1] != "create containerrecreaterequests" || img != defaultQuickExit):
				t.Fatalf("refused CRR: writes %v, sidecar image %s; want the create, then a patch to %s", verbs, img, defaultQuickExit)
			case !refuse && (len(writes) != 1 || verbs[0] != "create containerrecreaterequests" || img == defaultQuickExit):
				t.Fatalf("admitted CRR: writes %v, sidecar image %s; want only the CRR", verbs, img)
			}
		})
	}
}
