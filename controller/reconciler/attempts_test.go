package reconciler_test

import (
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Issue 15 item 3, the gap the simulator found (scenario crr-ttl-mid-pod):
// the attempt was recorded on the pod only as the retry was sent, so a CRR
// that failed and was deleted (kruise's ttl) during the retry's backoff left
// nothing behind, and the retry was attempt 1 again, for ever. Now the
// failed attempt is recorded while the retry waits, once.
func TestFailedAttemptIsRecordedBeforeTheRetry(t *testing.T) {
	pod := donePod("p", "normal", markCRR)
	failed := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: decision.CRRName(pod, 1), CreationTimestamp: metav1.NewTime(podtest.Epoch),
			Labels: map[string]string{reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: "1"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{
			{Name: "log", StatusContext: &kruisev1alpha1.ContainerRecreateRequestContainerContext{RestartCount: 0}}}},
		// Completed a second ago with the sidecar still running: a failed
		// kill whose retry waits for the backoff.
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted,
			CompletionTime: &metav1.Time{Time: podtest.Epoch.Add(10 * time.Second)}},
	}
	a, rec, _ := newAPI(t, pod)
	a.crrs = append(a.crrs, failed)
	a.catchUp()
	mustSync(t, rec, "p")
	if got := strings.Join(a.writes, ","); got != "annotate" || a.pods["p"].Annotations[decision.AnnotationCRRAttempts] != "1" {
		t.Fatalf("writes %s, attempts annotation %q; want one annotate recording attempt 1", got, a.pods["p"].Annotations[decision.AnnotationCRRAttempts])
	}
	mustSync(t, rec, "p") // a lagging cache: not written twice
	if len(a.writes) != 1 {
		t.Fatalf("the attempt was recorded again while the cache lagged: %v", a.writes)
	}

	// kruise deletes the CRR; the retry, after the backoff, is attempt 2.
	a.crrs = nil
	a.catchUp()
	a.clock.Step(time.Minute)
	mustSync(t, rec, "p")
	if n := len(a.crrs); n != 1 || a.crrs[0].Name != decision.CRRName(pod, 2) {
		t.Fatalf("after the CRR was deleted: CRRs %v, want only %s", a.crrs, decision.CRRName(pod, 2))
	}
}
