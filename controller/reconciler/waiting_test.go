package reconciler

import (
	"context"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

type mapReader map[string]*corev1.Pod

func (r mapReader) Pod(ns, name string) (*corev1.Pod, error) {
	if p := r[ns+"/"+name]; p != nil {
		return p, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}
func (mapReader) Node(string) (decision.NodeFacts, bool) { return decision.NodeFacts{}, true }
func (mapReader) CRRs(*corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	return nil, nil
}
func (mapReader) CRRAPIAvailable() bool { return true }
func (mapReader) RediscoverCRRAPI()     {}

// KruiseDaemon: no NodeImages here, so nothing is known of the daemons.
func (mapReader) KruiseDaemon(string, time.Time, time.Duration) (decision.DaemonState, string) {
	return decision.DaemonUnknown, ""
}

type nopEvents struct{}

func (nopEvents) Event(runtime.Object, string, string, string) {}

// The oldest-wait gauge follows the pod whose mains finished first while a
// sidecar still runs, and drops to 0 once that pod is gone.
func TestOldestWaitingGauge(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0.Add(90 * time.Second))
	pod := func(name string, exited time.Time) *corev1.Pod {
		return podtest.Pod(name).UID(name).Node("n").
			Container("main", podtest.Exited(0, exited)).
			Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Running()).Build()
	}
	pods := mapReader{"default/a": pod("a", t0), "default/b": pod("b", t0.Add(60*time.Second))}
	m := NewMetrics(nil)
	rec := New(DefaultConfig(), pods, podtest.NopWriter{}, NoLiveReads{}, nopEvents{}, m, clk)
	if got := testutil.ToFloat64(m.OldestWaiting); got != 0 {
		t.Fatalf("before any sync: %v, want 0", got)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.OldestWaiting); got != 90 {
		t.Errorf("two pods waiting since 90 s and 30 s: %v, want 90", got)
	}
	delete(pods, "default/a")
	if _, err := rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.OldestWaiting); got != 30 {
		t.Errorf("after the oldest is deleted: %v, want 30", got)
	}
	delete(pods, "default/b")
	if _, err := rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.OldestWaiting); got != 0 {
		t.Errorf("no pod left: %v, want 0", got)
	}
}
