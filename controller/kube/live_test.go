package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// LiveReader.NodeLabels: a node the API server has, with its labels; one it
// does not have, not found.
func TestLiveReaderNodeLabels(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk-1", Labels: map[string]string{"type": "virtual-kubelet"}}}
	l := LiveReader{Client: fake.NewClientset(node)}
	if labels, ok := l.NodeLabels("vk-1"); !ok || labels["type"] != "virtual-kubelet" {
		t.Errorf("NodeLabels(vk-1) = %v, %v; want its labels", labels, ok)
	}
	if labels, ok := l.NodeLabels("gone"); ok || labels != nil {
		t.Errorf("NodeLabels(gone) = %v, %v; want nil, false", labels, ok)
	}
}
