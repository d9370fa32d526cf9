package app

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// At start, one of OpenKruise's SidecarTerminator events on a pod (its
// reason, kill_container_action.go) tells the reconciler that terminator
// acts in the cluster; other events do not.
func TestCheckKruiseTerminatorAtStart(t *testing.T) {
	ev := func(name, reason, component string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jobs"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "jobs", Name: "p-" + name},
			Reason:         reason, Source: corev1.EventSource{Component: component},
			Message: "Kruise SidecarTerminator is trying to terminate sidecar [proxy] using crr"}
	}
	for _, tc := range []struct {
		name   string
		events []*corev1.Event
		seen   bool
	}{
		{"none", nil, false},
		{"others' events only", []*corev1.Event{ev("a", "SidecarTerminating", "sidecar-terminator"), ev("b", "Scheduled", "default-scheduler")}, false},
		{"kruise's terminator acted", []*corev1.Event{ev("a", "Scheduled", "default-scheduler"), ev("c", "SidecarTerminator", "sidecarterminator-controller")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, e := range tc.events {
				if _, err := client.CoreV1().Events(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			rec := reconciler.New(reconciler.DefaultConfig(), nil, nil, reconciler.NoLiveReads{}, nil, nil, clock.RealClock{})
			checkKruiseTerminator(context.Background(), client, rec)
			// KruiseTerminatorSeen reports news: false when the check set it.
			if seen := !rec.KruiseTerminatorSeen(); seen != tc.seen {
				t.Errorf("seen %t, want %t", seen, tc.seen)
			}
		})
	}
}
