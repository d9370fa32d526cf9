package kube

import (
	"context"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// KruiseTerminatorCRR implements reconciler.SecondTerminatorReader, one of
// the sync's live reads: OpenKruise's SidecarTerminator's CRR for the pod,
// read from the API server. The CRR informer lists only this controller's
// CRRs, and the reconciler asks only where its plan names the look
// (decision.Confirm.SecondTerminator), so one GET then costs less than
// caching every CRR of the cluster.
func (w Writer) KruiseTerminatorCRR(ctx context.Context, pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return getKruiseTerminatorCRR(ctx, w.Kruise, pod)
}

func getKruiseTerminatorCRR(ctx context.Context, client kruiseclient.Interface, pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	if client == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
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
