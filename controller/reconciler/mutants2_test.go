package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Only a CRR create answered AlreadyExists is work already done (an earlier
// run made it); an image patch answered AlreadyExists is not a swap that
// happened, and counts as a failed write.
func TestOnlyACRRCreateAnsweredAlreadyExistsIsDone(t *testing.T) {
	f := newFixture(jobPod(markImage))
	f.w.answers["swap"] = []error{apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, f.w.pod.Name)}
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionSwapImage), reconciler.ResultAlreadyDone)); got != 0 {
		t.Errorf("swap actions with result already-done = %v, want 0", got)
	}
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionSwapImage), reconciler.ResultError)); got != 1 {
		t.Errorf("swap actions with result error = %v, want 1", got)
	}
}

// failingLiveWorld is world with an API server whose CRR reads fail.
type failingLiveWorld struct {
	*world
	reads []string
}

func (w *failingLiveWorld) LivePod(context.Context, string, string) (*corev1.Pod, error) { return w.pod, nil }
func (w *failingLiveWorld) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	w.reads = append(w.reads, name)
	return nil, apierrors.NewInternalError(errors.New("etcd timeout"))
}

// Attempt 1 is recorded on the pod and the cache does not show its CRR; the
// read of it from the API server fails. Attempt 2 is not made blind (it could
// run beside attempt 1): the sync fails, and the queue tries again.
func TestASecondAttemptIsNotMadeWhenTheReadOfTheFirstFails(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationCRRAttempts, "1").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR).Build()
	w := &failingLiveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}}
	f := newFixture(pod)
	f.w = w.world
	f.rec = reconciler.New(reconciler.DefaultConfig(), w.world, w, f.ev, f.metrics, f.clock)
	f.clock.SetTime(podtest.Epoch.Add(31 * time.Second))
	_, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name})
	if err == nil || !apierrors.IsInternalError(err) {
		t.Errorf("Sync error = %v, want the failed read's", err)
	}
	first := decision.CRRName(pod, 1)
	if len(w.sent) != 0 || len(w.reads) != 1 || w.reads[0] != first {
		t.Fatalf("writes %v, live reads %v; want no write after one failed read of %s", w.sent, w.reads, first)
	}
}
