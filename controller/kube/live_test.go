package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// LiveReader.Node: a node the API server has, with its labels,
// kubeletVersion and providerID; one it does not have, not found.
func TestLiveReaderNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk-1", Labels: map[string]string{"type": "virtual-kubelet"}},
		Spec:   corev1.NodeSpec{ProviderID: "azure:///aci"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.25.0-vk-azure-aci-1.6.4"}}}
	l := LiveReader{Client: fake.NewClientset(node)}
	f, ok := l.Node("vk-1")
	if !ok || f.Labels["type"] != "virtual-kubelet" || f.KubeletVersion != "v1.25.0-vk-azure-aci-1.6.4" || f.ProviderID != "azure:///aci" {
		t.Errorf("Node(vk-1) = %+v, %v; want its labels, kubeletVersion and providerID", f, ok)
	}
	if p, _ := decision.PlatformOf(f, true); p != decision.PlatformAzureACI {
		t.Errorf("platform of vk-1 = %s, want %s", p, decision.PlatformAzureACI)
	}
	if f, ok := l.Node("gone"); ok || f.Labels != nil {
		t.Errorf("Node(gone) = %+v, %v; want nothing, false", f, ok)
	}
}
