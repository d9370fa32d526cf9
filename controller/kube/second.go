package kube

import (
	"context"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// KruiseTerminatorCRR reads OpenKruise's SidecarTerminator's CRR for the
// pod live: the CRR informer lists only this controller's CRRs, and the
// reconciler asks only on a signal (reconciler/second.go), so one GET then
// costs less than caching every CRR of the cluster.
func (c *Caches) KruiseTerminatorCRR(pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return getKruiseTerminatorCRR(c.kruise, pod)
}

// KruiseTerminatorCRR: explain looks every time.
func (l LiveReader) KruiseTerminatorCRR(pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return getKruiseTerminatorCRR(l.Kruise, pod)
}

func getKruiseTerminatorCRR(client kruiseclient.Interface, pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	if client == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	crr, err := client.AppsV1alpha1().ContainerRecreateRequests(pod.Namespace).Get(ctx, decision.KruiseTerminatorCRRName(pod), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	// Kruise's CRR is owned by the pod; one of the name that is not (a pod
	// UID reused is impossible, but a CRR made by hand is not) is not its.
	for _, o := range crr.OwnerReferences {
		if o.UID == pod.UID {
			return crr, nil
		}
	}
	return nil, nil
}

var (
	_ reconciler.SecondTerminatorReader = (*Caches)(nil)
	_ reconciler.SecondTerminatorReader = LiveReader{}
)
