package reconciler_test

import (
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// While leadership moves, two replicas write for a moment (soak seeds 282
// and 329). This one deletes stage 1's CRR, whose turn is over, and stage
// 2's CRR is refused; the other replica, whose cache shows stage 1's CRR gone
// and its sidecar running, makes it again under the same name. Before this
// one retries stage 2's CRR it reads the CRR it deleted live, finds it made
// again, and does not make stage 2's beside it: kruise-daemon works on one of
// a pod's CRRs at a time and the other's deadline would run while it waits.
func TestAStageCRRMadeAgainByAnotherReplicaIsNotLeftBesideTheNext(t *testing.T) {
	pod := shipperPod().Build()
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
	st1, st2 := stageTwoRefused(t, f)
	// The cache drops the deleted CRR; the other replica makes it again,
	// which this one's cache does not show yet.
	w.crrs, w.sent = nil, nil
	again := stageCRR(st1, 1, "fluent-bit")
	again.Labels[reconciler.LabelManagedBy], again.Labels[reconciler.LabelPodUID] = reconciler.ManagedByValue, string(pod.UID)
	again.Spec.PodName = pod.Name
	again.CreationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Second))
	again.Status.Phase = ""
	w.live[st1] = again
	f.clock.Step(decision.DefaultPolicy().RetryBackoff)
	f.sync(t)
	for _, s := range w.sent {
		if s == "crr "+st2 {
			t.Fatalf("writes %v: stage 2's CRR made while stage 1's, made again, is in flight", w.sent)
		}
	}
	if !strings.Contains(strings.Join(w.reads, ","), st1) {
		t.Errorf("live reads %v, want %s read before stage 2's CRR is made", w.reads, st1)
	}
}
