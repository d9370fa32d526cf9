package native

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// MinVersion is the first Kubernetes version whose kubelet and API server run
// native sidecars (init containers with restartPolicy Always) by default:
// the SidecarContainers feature gate is beta and on from 1.29 (GA in 1.33).
var MinVersion = version.MajorMinor(1, 29)

// NodeRunsNativeSidecars reports whether the node's kubelet runs native
// sidecars, and why or why not, from what the node says of itself: its
// platform first (decision.PlatformOf, the one platform model the controller,
// explain and the simulator read too), then, where the platform can run them,
// the kubelet's version.
//
// A virtual-kubelet node (virtual matches its labels) is never taken to run
// them: a provider runs the containers it is handed its own way, and none is
// known to start restartable init containers beside the main ones and stop
// them after (Azure ACI's provider creates init containers as run-to-completion
// ones), so a converted sidecar there could hold the pod forever.
func NodeRunsNativeSidecars(node *corev1.Node, virtual labels.Selector) (bool, string) {
	isVirtual := virtual != nil && !virtual.Empty() && virtual.Matches(labels.Set(node.Labels))
	facts := decision.NodeFacts{Name: node.Name, Labels: node.Labels, KubeletVersion: node.Status.NodeInfo.KubeletVersion, ProviderID: node.Spec.ProviderID}
	platform, how := decision.PlatformOf(facts, isVirtual)
	if !platform.Capabilities().NativeSidecars {
		return false, fmt.Sprintf("node %s: %s node (%s), which runs no native sidecars", node.Name, platform, how)
	}
	raw := node.Status.NodeInfo.KubeletVersion
	v, err := version.ParseGeneric(raw)
	if err != nil {
		return false, fmt.Sprintf("node %s reports no readable kubelet version (%q)", node.Name, raw)
	}
	if v.LessThan(MinVersion) {
		return false, fmt.Sprintf("node %s runs kubelet %s, older than %s", node.Name, raw, MinVersion)
	}
	return true, fmt.Sprintf("node %s runs kubelet %s", node.Name, raw)
}

// ServerRunsNativeSidecars reports whether an API server of that version
// keeps a container's restartPolicy: an older one drops the field, and the
// moved sidecar would become an init container the pod waits on forever.
func ServerRunsNativeSidecars(serverVersion string) (bool, string) {
	v, err := version.ParseGeneric(serverVersion)
	if err != nil {
		return false, fmt.Sprintf("the API server's version %q is not known", serverVersion)
	}
	if v.LessThan(MinVersion) {
		return false, fmt.Sprintf("the API server runs %s, older than %s", serverVersion, MinVersion)
	}
	return true, ""
}
