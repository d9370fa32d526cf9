package reconciler_test

import (
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Soak seed 403: this replica's create of stage 1's CRR is refused; another
// replica makes it, and its sidecar stops, while this one's cache does not
// show the CRR yet. Before making stage 2's CRR it reads the refused name
// live and deletes it (its turn is over) before making stage 2's.
func TestAStageCRRRefusedHereAndMadeByAnotherReplicaIsNotLeftBesideTheNext(t *testing.T) {
	build := func(shipper podtest.Option) *podtest.Builder {
		return shipperPod(shipper)
	}
	pod := build(podtest.Running()).Build()
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
	st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
	w.answers["crr "+st1] = []error{apierrors.NewForbidden(schema.GroupResource{}, st1, nil)}
	f.clock.SetTime(podtest.Epoch.Add(11 * time.Second))
	f.sync(t)
	w.sent = nil
	made := stageCRR(st1, 1, "fluent-bit")
	made.Labels[reconciler.LabelManagedBy], made.Labels[reconciler.LabelPodUID] = reconciler.ManagedByValue, string(pod.UID)
	made.Spec.PodName = pod.Name
	w.live[st1] = made
	w.pod = build(podtest.Exited(0, podtest.Epoch.Add(12*time.Second))).Build()
	f.clock.Step(time.Minute)
	f.sync(t)
	if got, want := strings.Join(w.sent, ","), "delete "+st1+",crr "+st2; got != want {
		t.Fatalf("writes %s, want %s: stage 1's CRR, made by another replica, deleted before stage 2's is made", got, want)
	}
}
