package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

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
	// The pod has no annotations at all: the patch that adds the key to the
	// map fails its test, and the one that adds the map applies.
	if got, want := a.pods["p"].Annotations[decision.AnnotationCRRAttempts], decision.AttemptRecord(0, 1, podtest.Epoch); strings.Join(a.writes, ",") != "patch,patch" || got != want {
		t.Fatalf("writes %v, attempts annotation %q; want the patches recording %q: attempt 1, begun at its CRR's creation", a.writes, got, want)
	}
	mustSync(t, rec, "p") // a lagging cache: not written twice
	if len(a.writes) != 2 {
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

// The first attempt failed and was recorded on the pod (attempts "1"); the
// cache does not show its CRR (a restarted controller's informer has not
// listed it yet). Before attempt 2 the controller reads attempt 1 from the
// API server, finds it still in flight, and waits for it; had it not asked,
// attempt 2 would run beside attempt 1. Reading it is what makes the
// difference, so the read is asserted too.
func TestASecondAttemptReadsTheFirstTheCacheDoesNotShow(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationCRRAttempts, "1").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR).Build()
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
	first := decision.CRRName(pod, 1)
	w.live[first] = &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: "default",
		CreationTimestamp: metav1.NewTime(podtest.Epoch.Add(30 * time.Second)),
		Labels:            map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelAttempt: "1", reconciler.LabelPodUID: string(pod.UID)}},
		Spec:   kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name, Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating}}
	f.clock.SetTime(podtest.Epoch.Add(31 * time.Second))
	f.sync(t)
	if len(w.sent) != 0 || strings.Join(w.reads, ",") != first {
		t.Fatalf("writes %v, live reads %v; want no write while attempt 1 is in flight, after one read of %s", w.sent, w.reads, first)
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
	f := newFixtureLive(w.world, w)
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

// As TestASecondAttemptReadsTheFirstTheCacheDoesNotShow, with attempt 1's
// managed-by label stripped by a policy: the live read takes it for ours by
// its other marks, among them its attempt label "1", and attempt 2 waits.
func TestASecondAttemptReadsTheFirstWithItsLabelStripped(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationCRRAttempts, "1").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR).Build()
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
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

// Attempt 1's CRR failed and the cache shows it: attempt 2 is made with no
// live read (the live reads before a retry are for a first attempt the cache
// does not show, leadermove_test.go), so a retry costs one write.
func TestASecondAttemptAfterAFailedFirstTheCacheShowsReadsNothingLive(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationCRRAttempts, "1").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR, podtest.Running()).Build()
	first := stageCRR(decision.CRRName(pod, 1), 0, "log")
	first.Labels[reconciler.LabelManagedBy], first.Labels[reconciler.LabelPodUID] = reconciler.ManagedByValue, string(pod.UID)
	delete(first.Labels, reconciler.LabelStage)
	first.Spec.PodName = pod.Name
	first.Status.Phase = kruisev1alpha1.ContainerRecreateRequestCompleted
	first.Status.CompletionTime = &metav1.Time{Time: podtest.Epoch.Add(15 * time.Second)}
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}, crrs: []*kruisev1alpha1.ContainerRecreateRequest{first}},
		live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
	f.clock.SetTime(podtest.Epoch.Add(5 * time.Minute))
	f.sync(t)
	if got, want := strings.Join(w.sent, ","), "crr "+decision.CRRName(pod, 2)+",annotate "+decision.AnnotationCRRAttempts; got != want {
		t.Fatalf("writes %s, want %s: attempt 2's CRR, then its record", got, want)
	}
	if len(w.reads) != 0 {
		t.Errorf("live reads %v, want none: the cache shows attempt 1", w.reads)
	}
}
