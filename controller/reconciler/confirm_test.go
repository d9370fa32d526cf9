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

// liveWorld is world with an API server to read from directly.
type liveWorld struct {
	*world
	live  map[string]*kruisev1alpha1.ContainerRecreateRequest
	reads []string
}

func (w *liveWorld) LivePod(context.Context, string, string) (*corev1.Pod, error) { return w.pod, nil }
func (w *liveWorld) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	w.reads = append(w.reads, name)
	if crr := w.live[name]; crr != nil {
		return crr, nil
	}
	return nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), name)
}

// Stage 1's shipper still runs past its bound: its CRR is deleted and stage
// 2's CRR (naming both) is refused. Once the cache no longer shows stage 1's
// CRR, the pod looks as if stage 1 had never been stopped; the controller
// remembers that it deleted it, so stage 2's CRR is retried and stage 1's is
// not made again (the order never goes back, and a stage's stop is not
// repeated within the bound).
func TestADeletedStageCRRIsNotMadeAgain(t *testing.T) {
	pod := shipperPod().Build()
	f := newFixture(pod)
	st1, st2 := stageTwoRefused(t, f)
	// The cache drops the deleted CRR; the pod is as it was.
	f.w.crrs, f.w.sent = nil, nil
	f.clock.Step(decision.DefaultPolicy().RetryBackoff)
	f.sync(t)
	if got, want := strings.Join(f.w.sent, ","), "crr "+st2; got != want {
		t.Fatalf("after the backoff: writes %s, want %s (stage 1's CRR %s must not be made again)", got, want, st1)
	}
}

// A failed kill was retried: the pod records attempt 2, but the cache does
// not show that CRR yet (a restarted controller lists pods and CRRs one
// after the other; a create that timed out may have been applied). The
// controller reads attempt 2 from the API server before making attempt 3,
// finds it in flight, and waits for it: no Warning, no third CRR.
func TestARetryWaitsForTheAttemptTheCacheDoesNotShow(t *testing.T) {
	pod := podtest.Pod("p").Annotate(decision.AnnotationCRRAttempts, "2").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR).Build()
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
	crr := func(attempt int, created time.Duration, phase kruisev1alpha1.ContainerRecreateRequestPhase) *kruisev1alpha1.ContainerRecreateRequest {
		c := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: decision.StageCRRName(pod, 0, attempt), Namespace: "default",
			CreationTimestamp: metav1.NewTime(podtest.Epoch.Add(created)),
			Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue,
				reconciler.LabelAttempt: string(rune('0' + attempt)), reconciler.LabelPodUID: string(pod.UID)}},
			Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name, Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}}}}
		c.Status.Phase = phase
		return c
	}
	w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{crr(1, 11*time.Second, kruisev1alpha1.ContainerRecreateRequestCompleted)}
	w.live[decision.StageCRRName(pod, 0, 2)] = crr(2, 30*time.Second, kruisev1alpha1.ContainerRecreateRequestRecreating)
	f.clock.SetTime(podtest.Epoch.Add(31 * time.Second))
	after := f.sync(t)
	if len(w.sent) != 0 {
		t.Fatalf("writes %v, want none while attempt 2 is in flight", w.sent)
	}
	if got := f.ev.warnings(decision.ReasonSidecarKillFailed); len(got) != 0 {
		t.Errorf("Warnings %v for a kill still in flight", got)
	}
	if after <= 0 {
		t.Errorf("requeue %s: the pod must be looked at again by attempt 2's deadline", after)
	}
	// Later syncs decide from the remembered CRR without reading it again.
	f.sync(t)
	if len(w.reads) != 1 {
		t.Errorf("live reads %v, want one", w.reads)
	}
}

// One sync makes a CRR for one sidecar and swaps another; the swap is
// refused (500), so the sync decides again on the same cache, which does not
// show the new CRR yet. The CRR is not sent a second time: a refusal of that
// second create would count as a failed kill and swap a sidecar the CRR is
// about to stop.
func TestARefusalPassDoesNotResendAnAcceptedCRR(t *testing.T) {
	pod := podtest.Pod("p").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("log", markCRR).Container("proxy", markImage).Build()
	f := newFixture(pod)
	crr := decision.CRRName(pod, 1)
	f.w.answers["swap"] = []error{apierrors.NewInternalError(context.DeadlineExceeded)}
	f.w.answers["crr "+crr] = []error{nil, apierrors.NewInternalError(context.DeadlineExceeded)}
	f.sync(t)
	if got, want := strings.Join(f.w.sent, ","), "crr "+crr+",swap"; got != want {
		t.Fatalf("writes %s, want %s", got, want)
	}
	if got := f.ev.warnings(decision.ReasonSidecarKillFailed); len(got) != 1 || !strings.Contains(got[0].message, "image swap") {
		t.Errorf("Warnings %+v, want one, for the refused swap only", got)
	}
}

// A CRR create gets no answer (a timeout) but was applied: before the pod's
// next write that assumes it absent (the retry's attempt 2), the API server
// is asked (Plan.Confirm), and the CRR counts as made. It is not sent again, and the next
// sync, whose cache does not show it yet, waits for it rather than deciding
// from a view without it (where a stop order would go on to the next
// stage's CRR beside it).
func TestATimedOutCreateThatWasAppliedCountsAsMade(t *testing.T) {
	pod := podtest.Pod("p").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", markCRR).Build()
	w := &liveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	f := newFixtureLive(w.world, w)
	name := decision.CRRName(pod, 1)
	w.answers["crr "+name] = []error{apierrors.NewTimeoutError("no answer", 1)}
	made := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		CreationTimestamp: metav1.NewTime(f.clock.Now()),
		Labels:            map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: string(pod.UID)}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name}}
	w.live[name] = made
	f.sync(t)
	f.clock.Step(decision.DefaultPolicy().RetryBackoff)
	f.sync(t)
	if got, want := strings.Join(w.sent, ","), "crr "+name; got != want {
		t.Fatalf("writes %s, want %s", got, want)
	}
}

// countingReader counts the CRR lists it is asked for: behind `explain` the
// Reader is the API server (kube.LiveReader), where each is a request.
type countingReader struct {
	*apiFake
	lists int
}

func (r *countingReader) CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	r.lists++
	return r.apiFake.CRRs(pod)
}

// A plan for a pod the reconciler remembers no CRR of lists the pod's CRRs
// once: the remembered ones are merged in only when there are some.
func TestAPlanWithNothingRememberedListsCRRsOnce(t *testing.T) {
	pod := donePod("p", "normal", markCRR)
	a, _, _ := newAPI(t, pod)
	a.crrs = append(a.crrs, inFlightCRR(pod, "log", 600))
	a.catchUp()
	r := &countingReader{apiFake: a}
	rec := reconciler.New(reconciler.DefaultConfig(), r, a, a, a, nil, a.clock)
	plan, err := rec.ExplainPlan(a.cachedPods["p"], a.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r.lists != 1 || len(plan.CRRs) != 1 {
		t.Errorf("%d CRR lists, %d CRRs in the plan; want 1 and 1", r.lists, len(plan.CRRs))
	}
}

// Stage 1's CRR was deleted by this controller and stage 2's refused; the
// cache no longer shows stage 1's. Before stage 2's is retried, stage 1's is
// read live (another replica may have made it again); when that read fails,
// stage 2's is not made blind: the sync fails and the queue tries again.
func TestAStageCRRIsNotRetriedWhenTheReadOfTheDeletedEarlierStageFails(t *testing.T) {
	pod := shipperPod().Build()
	w := &failingLiveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}}
	f := newFixtureLive(w.world, w)
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

// A deleted earlier stage's CRR that the cache no longer shows is read live
// before the next stage's CRR is retried, even while the cache shows another
// CRR of the pod: "shown" is about that very name.
func TestADeletedStageCRRIsReadLiveBesideAnotherCachedCRR(t *testing.T) {
	pod := shipperPod().Build()
	w := &failingLiveWorld{world: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}}
	f := newFixtureLive(w.world, w)
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

// The live reads are a dependency New requires: a reconciler built without
// them is refused at once, not found to read nothing live in production.
func TestNewRefusesAReconcilerWithoutLiveReads(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with a nil LiveReader returned a reconciler")
		}
	}()
	a, _, _ := newAPI(t)
	reconciler.New(reconciler.DefaultConfig(), a, a, nil, a, nil, a.clock)
}

// A reconciler its caller built to read nothing live (NoLiveReads) does not
// act on what it could not check: a plan that needs a live read (the Job's
// podFailurePolicy) fails the sync, and nothing is written.
func TestAReconcilerWithNoLiveReadsWritesNothingItCouldNotCheck(t *testing.T) {
	a, _, _ := newAPI(t, failedJobPod("p"))
	rec := reconciler.New(reconciler.DefaultConfig(), a, a, reconciler.NoLiveReads{}, a, nil, a.clock)
	if _, err := syncPod(t, rec, "p"); err == nil || !strings.Contains(err.Error(), "NoLiveReads") {
		t.Errorf("Sync: %v, want the live read refused", err)
	}
	if len(a.writes) != 0 {
		t.Errorf("writes %v, want none", a.writes)
	}
}
