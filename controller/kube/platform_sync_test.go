package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// On a node labelled as EKS Fargate, with the CRR API served and no sign
// of a daemon either way (as on a young node), a sidecar marked for both
// paths is swapped at once: one pod patch, no CRR.
func TestSyncSwapsAtOnceOnAFargateNode(t *testing.T) {
	pod := jobPod("job-f", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
	f := newFixture(t, []*corev1.Pod{pod}, map[string]map[string]string{"node-1": {decision.LabelEKSComputeType: "fargate"}})
	writes := f.sync("job-f")
	if len(writes) != 1 || writes[0].GetVerb() != "patch" || writes[0].GetResource().Resource != "pods" || writes[0].GetSubresource() != "" {
		t.Fatalf("want exactly one pod patch (the swap), got %v", writes)
	}
	// The same pod on a normal node gets its CRR: the label made the difference.
	f = newFixture(t, []*corev1.Pod{pod}, map[string]map[string]string{"node-1": {}})
	if writes := f.sync("job-f"); len(writes) != 1 || writes[0].GetResource().Resource != "containerrecreaterequests" {
		t.Fatalf("on a normal node want one CRR, got %v", writes)
	}
}

// On an Azure ACI node (known from its kubeletVersion) the swap is never
// written: the phase is settled from the main, with a SidecarLeftRunning
// Warning.
func TestSyncSettlesThePhaseOnAnACINode(t *testing.T) {
	pod := jobPod("job-a", podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
	f := newFixture(t, []*corev1.Pod{pod}, nil)
	aci := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"type": "virtual-kubelet"}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.25.0-vk-azure-aci-1.6.4"}}}
	if err := f.caches.NodeInformer.GetIndexer().Add(aci); err != nil {
		t.Fatal(err)
	}
	writes := f.sync("job-a")
	var got []string
	for _, w := range writes {
		got = append(got, w.GetVerb()+" "+w.GetResource().Resource+"/"+w.GetSubresource())
		if p, ok := w.(interface{ GetPatch() []byte }); ok && strings.Contains(string(p.GetPatch()), "/image") {
			t.Errorf("an image patch was written on ACI: %s", p.GetPatch())
		}
	}
	if len(got) != 2 || got[0] != "patch pods/status" || got[1] != "patch pods/" {
		t.Fatalf("writes %v, want the status settle and its annotation", got)
	}
	warned := false
	for _, e := range f.drainEvents() {
		warned = warned || strings.HasPrefix(e, "Warning "+decision.ReasonSidecarLeftRunning)
	}
	if !warned {
		t.Errorf("no %s Warning", decision.ReasonSidecarLeftRunning)
	}
}
