package sim

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
)

// The native-sidecar webhook at a pod's creation (controller/webhook), as
// the simulator runs it: the controller's own conversion (controller/native
// Decide and Apply, the functions the webhook calls), given the pod's node as
// the webhook lists it. The kubelet model then runs the moved sidecars as
// native ones (sim/model: started before the mains, stopped by the kubelet
// once they are done), and the checker holds the controller to writing
// nothing for them.

// simServerVersion is the API server the webhook is told of.
const simServerVersion = "v1.37.2"

// simKubeletVersion is what a simulated node without a version of its own
// reports: the kubelet the model is cited from (sim/model/lifecycle.go).
const simKubeletVersion = "v1.37.2"

// admitNative converts an opted-in template's pod, unless the template says
// it was admitted while the webhook was down: failurePolicy Ignore, so the
// API server stores it unchanged and the kill path finishes it.
func (w *World) admitNative(pod *corev1.Pod, n *node, t *Template) *corev1.Pod {
	if !t.NativeOptIn {
		return pod
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[native.LabelOptIn] = native.LabelOptInValue
	if t.WebhookDown {
		return pod
	}
	cfg := native.Config{VirtualNodes: labels.SelectorFromSet(labels.Set{"type": "virtual-kubelet"}), ServerVersion: simServerVersion}
	plan := native.Decide(pod, []*corev1.Node{n.object()}, cfg)
	if !plan.Convert {
		return pod
	}
	w.s.stats.converted++
	return native.Apply(pod, plan)
}

// object is the node as the API server serves it, as far as the webhook
// reads it: name, labels, kubelet version, providerID.
func (n *node) object() *corev1.Node {
	version := n.facts.KubeletVersion
	if version == "" {
		version = simKubeletVersion
	}
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}}
	obj.Spec.ProviderID = n.facts.ProviderID
	obj.Status.NodeInfo.KubeletVersion = version
	return obj
}
