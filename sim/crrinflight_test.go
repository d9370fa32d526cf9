package sim

import (
	"strings"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// exitedIsFinishedReader plants the bug of a controller that reads a
// Recreating CRR whose containers have exited as finished: kruise-daemon
// keeps such a CRR Recreating until its deadline under restartPolicy Never
// (crr_daemon_util.go, kruise v1.9.1), so the controller would make the next
// stage's CRR beside it without deleting it.
type exitedIsFinishedReader struct{ reconciler.Reader }

func (r exitedIsFinishedReader) CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	crrs, err := r.Reader.CRRs(pod)
	if err != nil {
		return nil, err
	}
	out := make([]*kruisev1alpha1.ContainerRecreateRequest, len(crrs))
	for i, c := range crrs {
		out[i] = c
		if c.Status.Phase == kruisev1alpha1.ContainerRecreateRequestRecreating && targetsExited(c, pod) {
			out[i] = c.DeepCopy()
			out[i].Status.Phase = kruisev1alpha1.ContainerRecreateRequestCompleted
		}
	}
	return out, nil
}

func targetsExited(crr *kruisev1alpha1.ContainerRecreateRequest, pod *corev1.Pod) bool {
	for _, c := range crr.Spec.Containers {
		for _, st := range pod.Status.ContainerStatuses {
			if st.Name == c.Name && st.State.Terminated == nil {
				return false
			}
		}
	}
	return true
}

// The checker's one-CRR-in-flight rule is wired: the planted bug makes a
// stage's CRR beside the earlier stage's, and the stop-order scenario fails
// on it, while the real controller passes the same scenario.
func TestSecondCRRInFlightFailsTheScenario(t *testing.T) {
	sc, err := Lookup("stop-order-two-stages")
	if err != nil {
		t.Fatal(err)
	}
	plant := func(r reconciler.Reader) reconciler.Reader { return exitedIsFinishedReader{r} }
	v := New(sc, 1, Options{Pods: 40, WrapReader: plant}).Run().Violation
	if v == nil || v.Kind != "safety" || !strings.Contains(v.Message, "is still in flight") {
		t.Fatalf("a CRR made beside one in flight went unnoticed: %v", v)
	}
	t.Logf("caught: %s", v.Message)
	if clean := New(sc, 1, Options{Pods: 40}).Run().Violation; clean != nil {
		t.Errorf("the scenario fails without the planted bug too:\n%s", clean)
	}
}
