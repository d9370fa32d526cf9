package sim

import (
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The trim probe passes the controller's live read of kruise's CRR through
// to the cache it wraps, as the production reader answers it.
func (p *trimProbe) KruiseTerminatorCRR(pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	if r, ok := p.Reader.(reconciler.SecondTerminatorReader); ok {
		return r.KruiseTerminatorCRR(pod)
	}
	return nil, nil
}
