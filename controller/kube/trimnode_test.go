package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// The node cache keeps what a node's platform is known from, and nothing
// else of the node: not its images, conditions, addresses or capacity.
func TestTrimNodeKeepsOnlyThePlatformFacts(t *testing.T) {
	full := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "fargate-ip-1", ResourceVersion: "7", Labels: map[string]string{decision.LabelEKSComputeType: "fargate"},
			Annotations: map[string]string{"big": strings.Repeat("x", 10000)}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/fargate-ip-1", PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.33.5-eks-ecaa3a6", OSImage: "Amazon Linux 2"},
			Images:     []corev1.ContainerImage{{Names: []string{"a", "b"}, SizeBytes: 1}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
	}
	obj, err := TrimNode(full)
	if err != nil {
		t.Fatal(err)
	}
	n := obj.(*corev1.Node)
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fargate-ip-1", ResourceVersion: "7", Labels: full.Labels},
		Spec:   corev1.NodeSpec{ProviderID: full.Spec.ProviderID},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.33.5-eks-ecaa3a6"}}}
	if n.String() != want.String() {
		t.Errorf("trimmed node\n%s\nwant\n%s", n, want)
	}
	if p, _ := decision.PlatformOf(NodeFacts(n), false); p != decision.PlatformEKSFargate {
		t.Errorf("platform of the trimmed node = %s, want %s", p, decision.PlatformEKSFargate)
	}
	full.Status.NodeInfo.KubeletVersion = strings.Repeat("v", 5000)
	obj, _ = TrimNode(full)
	if got := len(obj.(*corev1.Node).Status.NodeInfo.KubeletVersion); got > maxNodeString {
		t.Errorf("kept a kubeletVersion of %d bytes, want at most %d", got, maxNodeString)
	}
}
