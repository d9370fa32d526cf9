package reconciler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// liveAPIFake is apiFake as the live reader, counting the live pod reads.
type liveAPIFake struct {
	*apiFake
	podReads int
}

func (a *liveAPIFake) LivePod(_ context.Context, _, name string) (*corev1.Pod, error) {
	a.podReads++
	if p := a.pods[name]; p != nil {
		return p.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

// An ignore-exit-code sidecar the kubelet did not stop within the grace
// after the settle is stopped by us only while the settle stands. The
// kubelet's status manager may have written its phase (Running) back over
// it, and the cache may not show that yet (a lagging watch, soak seed 1086);
// a sidecar stopped then ends with the stop's exit, from which the kubelet
// fails a Never pod whose mains succeeded. So the pod is read live first:
// written back, it is settled again and the stop waits a new grace; still
// settled, the stop goes ahead.
func TestASettledPodsSidecarIsStoppedOnlyWhileTheLivePhaseIsTerminal(t *testing.T) {
	settledAt := podtest.Epoch.Add(11 * time.Second)
	settled := donePod("p", "normal", markCRR, ignoreRC)
	settled.Status.Phase = corev1.PodSucceeded
	settled.Status.Conditions = []corev1.PodCondition{{Type: decision.ConditionSidecarTerminated, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(settledAt)}}
	writtenBack := settled.DeepCopy()
	writtenBack.Status.Phase = corev1.PodRunning
	for name, tc := range map[string]struct {
		live   *corev1.Pod
		writes string
	}{
		"the kubelet wrote its phase back: settled again, no stop": {live: writtenBack, writes: "status,annotate"},
		"the settle stands: the stop":                              {live: settled, writes: "crr"},
	} {
		t.Run(name, func(t *testing.T) {
			a, _, m := newAPI(t, settled)
			a.pods["p"] = tc.live.DeepCopy()
			live := &liveAPIFake{apiFake: a}
			rec := reconciler.New(reconciler.DefaultConfig(), a, a, live, a, m, a.clock)
			// Past the pod's grace period and the margin after the settle.
			a.clock.SetTime(settledAt.Add(41 * time.Second))
			mustSync(t, rec, "p")
			if got := strings.Join(a.writes, ","); got != tc.writes {
				t.Errorf("writes %q, want %q", got, tc.writes)
			}
			if live.podReads != 1 {
				t.Errorf("live pod reads %d, want 1", live.podReads)
			}
			if p := a.pods["p"]; p.Status.Phase != corev1.PodSucceeded {
				t.Errorf("phase %s, want %s", p.Status.Phase, corev1.PodSucceeded)
			}
		})
	}
}
