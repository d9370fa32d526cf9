package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

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

// failingLiveWorld is world with an API server whose CRR reads fail with
// err, or find nothing while err is nil.
type failingLiveWorld struct {
	*world
	err   error
	reads []string
}

func (w *failingLiveWorld) LivePod(context.Context, string, string) (*corev1.Pod, error) {
	return w.pod, nil
}
func (w *failingLiveWorld) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	w.reads = append(w.reads, name)
	if w.err != nil {
		return nil, w.err
	}
	return nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), name)
}

// Attempt 1 is recorded on the pod and the cache does not show its CRR; the
// read of it from the API server fails. Attempt 2 is not made blind (it could
// run beside attempt 1): the sync fails, and the queue tries again.
func TestASecondAttemptIsNotMadeWhenTheReadOfTheFirstFails(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationCRRAttempts, "1").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR).Build()
	w := &failingLiveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, err: apierrors.NewInternalError(errors.New("etcd timeout"))}
	f := newFixtureWriting(w.world, w)
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

// Stage 1's CRR was deleted by this controller and stage 2's refused; the
// cache no longer shows stage 1's. Before stage 2's is retried, stage 1's is
// read live (another replica may have made it again); when that read fails,
// stage 2's is not made blind: the sync fails and the queue tries again.
func TestAStageCRRIsNotRetriedWhenTheReadOfTheDeletedEarlierStageFails(t *testing.T) {
	pod := shipperPod().Build()
	w := &failingLiveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}}
	f := newFixtureWriting(w.world, w)
	st1, _ := stageTwoRefused(t, f)
	w.crrs, w.sent, w.reads = nil, nil, nil
	w.err = apierrors.NewInternalError(errors.New("etcd timeout"))
	f.clock.Step(decision.DefaultPolicy().RetryBackoff)
	_, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name})
	if err == nil || !apierrors.IsInternalError(err) {
		t.Errorf("Sync error = %v, want the failed read's", err)
	}
	if len(w.sent) != 0 || strings.Join(w.reads, ",") != st1 {
		t.Fatalf("writes %v, live reads %v; want no write after one failed read of %s", w.sent, w.reads, st1)
	}
}

// As TestASecondAttemptReadsTheFirstTheCacheDoesNotShow, with attempt 1's
// managed-by label stripped by a policy: the live read takes it for ours by
// its other marks, among them its attempt label "1", and attempt 2 waits.
func TestASecondAttemptReadsTheFirstWithItsLabelStripped(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationCRRAttempts, "1").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR).Build()
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureWriting(w.world, w)
	first := decision.CRRName(pod, 1)
	deadline := int64(decision.CRRDeadline(pod, reconciler.DefaultConfig().Policy) / time.Second)
	w.live[first] = &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: "default",
		CreationTimestamp: metav1.NewTime(podtest.Epoch.Add(30 * time.Second)),
		Labels:            map[string]string{reconciler.LabelAttempt: "1", reconciler.LabelPodUID: string(pod.UID)},
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name, ActiveDeadlineSeconds: &deadline,
			Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating}}
	f.clock.SetTime(podtest.Epoch.Add(31 * time.Second))
	f.sync(t)
	if len(w.sent) != 0 || strings.Join(w.reads, ",") != first {
		t.Fatalf("writes %v, live reads %v; want no write while attempt 1 is in flight, after one read of %s", w.sent, w.reads, first)
	}
}

// A deleted earlier stage's CRR that the cache no longer shows is read live
// before the next stage's CRR is retried, even while the cache shows another
// CRR of the pod: "shown" is about that very name.
func TestADeletedStageCRRIsReadLiveBesideAnotherCachedCRR(t *testing.T) {
	pod := shipperPod().Build()
	w := &failingLiveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}}
	f := newFixtureWriting(w.world, w)
	st1, st2 := stageTwoRefused(t, f)
	// The cache drops the deleted CRR and shows another of stage 1, made
	// since under another name (a second attempt), completed.
	other := stageCRR(decision.StageCRRName(pod, 1, 2), 1, "fluent-bit")
	other.Labels[reconciler.LabelAttempt] = "2"
	other.Status.Phase = kruisev1alpha1.ContainerRecreateRequestCompleted
	w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{other}
	w.sent = nil
	f.clock.Step(decision.DefaultPolicy().RetryBackoff)
	f.sync(t)
	if strings.Join(w.reads, ",") != st1 {
		t.Errorf("live reads %v; want one of %s, which the cache does not show", w.reads, st1)
	}
	if got, want := strings.Join(w.sent, ","), "crr "+st2; got != want {
		t.Errorf("after the backoff: writes %s, want %s (%s is not found live)", got, want, st1)
	}
}

// The 400 taken as transient is kruise's CRR webhook's, for a CRR create
// only; an image patch answered 400 is refused for good.
func TestASwapAnsweredBadRequestIsPermanent(t *testing.T) {
	f := newFixture(jobPod(markImage))
	f.w.answers["swap"] = []error{apierrors.NewBadRequest("image not allowed")}
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.Refusals.WithLabelValues(string(decision.ActionSwapImage), "permanent")); got != 1 {
		t.Errorf("permanent swap refusals = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.metrics.Refusals.WithLabelValues(string(decision.ActionSwapImage), "transient")); got != 0 {
		t.Errorf("transient swap refusals = %v, want 0", got)
	}
}

// Two earlier stages' CRRs are deleted before stage 3's is made; the second
// delete is refused (a 500), so the sync decides again on the same cache,
// which still shows stage 1's CRR. The delete already sent and accepted is
// not sent a second time.
func TestAWriteAcceptedEarlierInTheSyncIsNotSentAgain(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationStopOrder, "a,b,c").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("a", markCRR).Container("b", markCRR).Container("c", markCRR).Build()
	f := newFixture(pod)
	st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
	f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{stageCRR(st1, 1, "a"), stageCRR(st2, 2, "b")}
	f.w.answers["delete "+st2] = []error{apierrors.NewInternalError(context.DeadlineExceeded)}
	f.clock.SetTime(podtest.Epoch.Add(10*time.Second + 400*time.Second))
	f.sync(t)
	deletes := 0
	for _, s := range f.w.sent {
		if s == "delete "+st1 {
			deletes++
		}
	}
	if deletes != 1 || len(f.w.sent) < 2 || f.w.sent[1] != "delete "+st2 {
		t.Fatalf("writes %v: want %s deleted once, then %s tried", f.w.sent, st1, st2)
	}
}
