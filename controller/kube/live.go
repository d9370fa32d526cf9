package kube

import (
	"context"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// LiveReader implements reconciler.Reader with direct API reads, for one-off
// questions such as `explain`; the controller itself reads from Caches.
type LiveReader struct {
	Client kubernetes.Interface
	Kruise kruiseclient.Interface
	CRRAPI bool
	// Meta reads OpenKruise's NodeImages for KruiseDaemon; nil: not looked up.
	Meta metadata.Interface
}

const liveTimeout = 30 * time.Second

func (l LiveReader) Pod(namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	return l.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (l LiveReader) Node(name string) (decision.NodeFacts, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	n, err := l.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return decision.NodeFacts{}, false
	}
	return NodeFacts(n), true
}

func (l LiveReader) CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	if !l.CRRAPI {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	sel := labels.SelectorFromSet(labels.Set{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: string(pod.UID)})
	list, err := l.Kruise.AppsV1alpha1().ContainerRecreateRequests(pod.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	out := make([]*kruisev1alpha1.ContainerRecreateRequest, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l LiveReader) CRRAPIAvailable() bool { return l.CRRAPI }

// RediscoverCRRAPI does nothing: explain asks discovery once, and its
// reconciler makes no CRR whose 404 would ask again.
func (LiveReader) RediscoverCRRAPI() {}

var _ reconciler.Reader = LiveReader{}
