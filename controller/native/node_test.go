package native_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
)

// The node check follows the platform model: a platform whose nodes run no
// native sidecars is refused whatever its version says, one that does is
// judged by its kubelet's version.
func TestNodeRunsNativeSidecarsFollowsThePlatformModel(t *testing.T) {
	virtual := labels.SelectorFromSet(labels.Set{"type": "virtual-kubelet"})
	node := func(name, kubelet, providerID string, l map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
		n.Status.NodeInfo.KubeletVersion, n.Spec.ProviderID = kubelet, providerID
		return n
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
		why  string
	}{
		{"a kubelet 1.37", node("n", "v1.37.2", "", nil), true, "runs kubelet v1.37.2"},
		{"a kubelet 1.28", node("n", "v1.28.9", "", nil), false, "older than 1.29"},
		{"Azure ACI, unlabelled", node("aci", "v1.30.0-vk-azure-aci-1.6.4", "", nil), false, string(decision.PlatformAzureACI)},
		{"a virtual-kubelet node", node("vk", "v1.37.2", "", map[string]string{"type": "virtual-kubelet"}), false, "virtual-kubelet node"},
		{"Alibaba ECI", node("eci", "v1.16.9-aliyun.1", "", map[string]string{"type": "virtual-kubelet"}), false, string(decision.PlatformAlibabaECI)},
		{"EKS Fargate 1.33", node("fargate-ip", "v1.33.1-eks-1", "", map[string]string{decision.LabelEKSComputeType: "fargate"}), true, "runs kubelet"},
		{"GKE Autopilot 1.32", node("gk3-c-pool-1", "v1.32.4-gke.100", "gce://p/z/gk3-c-pool-1", nil), true, "runs kubelet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := native.NodeRunsNativeSidecars(tc.node, virtual)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("NodeRunsNativeSidecars = %v, %q; want %v and a reason naming %q", got, why, tc.want, tc.why)
			}
		})
	}
}
