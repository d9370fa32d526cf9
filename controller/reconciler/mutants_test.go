package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The CRR carries the pod's own grace period in seconds (kruise-daemon's
// stop waits that long before SIGKILL), its deadline covers that grace, and
// a CRR outside a stop order has no stage label: kruise's webhook would
// default the grace to the pod's, and the stage label is what a later sync
// reads to know which stage a CRR stopped.
func TestCRRCarriesThePodsGraceAndNoStageOutsideAStopOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace *int64
		want  int64
	}{
		{"pod default", nil, 30},
		{"pod's own", int64p(95), 95},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := donePod("p", "normal", markCRR)
			pod.Spec.TerminationGracePeriodSeconds = tc.grace
			a, rec, _ := newAPI(t, pod)
			mustSync(t, rec, "p")
			if len(a.crrs) != 1 {
				t.Fatalf("CRRs %d, want 1", len(a.crrs))
			}
			c := a.crrs[0]
			if g := c.Spec.Strategy.TerminationGracePeriodSeconds; g == nil || *g != tc.want {
				t.Errorf("terminationGracePeriodSeconds %s, want %d", show(g), tc.want)
			}
			if d := c.Spec.ActiveDeadlineSeconds; d == nil || time.Duration(*d)*time.Second != decision.CRRDeadline(pod, reconciler.DefaultConfig().Policy) || *d <= tc.want {
				t.Errorf("activeDeadlineSeconds %s, want the decision's deadline, past the grace of %ds", show(d), tc.want)
			}
			if s, ok := c.Labels[reconciler.LabelStage]; ok {
				t.Errorf("stage label %q on a CRR outside a stop order", s)
			}
		})
	}
}

func int64p(v int64) *int64 { return &v }

func show(v *int64) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(*v)
}

// A CRR's own activeDeadlineSeconds, read from the cache, is the deadline the
// decision holds it to: a CRR given 300 s is still in flight 120 s after its
// creation, though the pod's CRRs get 60 s now; the retry comes only once
// those 300 s are over.
func TestCRRIsHeldToItsOwnDeadline(t *testing.T) {
	pod := donePod("p", "normal", markCRR)
	a, rec, _ := newAPI(t, pod)
	deadline := int64(300)
	crr := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: decision.CRRName(pod, 1), CreationTimestamp: metav1.NewTime(a.clock.Now()),
			Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: "1"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", ActiveDeadlineSeconds: &deadline,
			Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating},
	}
	a.crrs = append(a.crrs, crr)
	a.catchUp()
	created := a.clock.Now()
	for _, tc := range []struct {
		at    time.Duration
		retry bool
	}{{120 * time.Second, false}, {299 * time.Second, false}, {400 * time.Second, true}} {
		plan, err := rec.Plan(a.cachedPods["p"], created.Add(tc.at))
		if err != nil {
			t.Fatal(err)
		}
		retry := len(plan.Actions) == 1 && plan.Actions[0].Kind == decision.ActionCreateCRR && plan.Actions[0].Attempt == 2
		if retry != tc.retry {
			t.Errorf("%s after the CRR's creation: plan %+v (%s); want a retry: %v", tc.at, plan.Actions, plan.Verdict, tc.retry)
		}
	}
}

// A write refused as stale (a Conflict) was decided on a view the API server
// had moved past: the pod is not decided again on that same view (the pod's
// and its CRRs' resourceVersions) until the cache shows a newer one, or the
// expectation timeout (60 s) passes. A view with an object that has no
// resourceVersion cannot be told apart from the next, so it holds nothing.
func TestAStaleWriteWaitsForTheCacheToMovePastItsView(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("moved"))
	setup := func(crrVersion string) *fixture {
		pod := podtest.Pod("p").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
			Container("log", markCRR).Container("proxy", markImage).Build()
		pod.ResourceVersion = "5"
		deadline := int64(600)
		crr := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: decision.CRRName(pod, 1), Namespace: "default",
			ResourceVersion: crrVersion, CreationTimestamp: metav1.NewTime(podtest.Epoch.Add(10 * time.Second)),
			Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: "1"}},
			Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", ActiveDeadlineSeconds: &deadline,
				Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}}},
			Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating}}
		f := newFixture(pod)
		f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{crr}
		f.w.answers["swap"] = []error{conflict}
		if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "p"}); !apierrors.IsConflict(err) {
			t.Fatalf("first sync: %v, want the swap's Conflict", err)
		}
		if got := strings.Join(f.w.sent, ","); got != "swap" {
			t.Fatalf("first sync: writes %s, want swap (the log's CRR is in flight)", got)
		}
		f.w.sent = nil
		return f
	}
	t.Run("same view waits out the timeout", func(t *testing.T) {
		f := setup("7")
		f.clock.Step(time.Second)
		if after := f.sync(t); after != 59*time.Second || len(f.w.sent) != 0 {
			t.Fatalf("same view 1s later: requeue %s, writes %v; want to wait 59s and write nothing", after, f.w.sent)
		}
		f.clock.Step(58 * time.Second)
		if f.sync(t); len(f.w.sent) != 0 {
			t.Fatalf("same view 59s later: writes %v, want none", f.w.sent)
		}
		f.clock.Step(time.Second)
		if f.sync(t); strings.Join(f.w.sent, ",") != "swap" {
			t.Fatalf("same view at the timeout: writes %v, want the swap", f.w.sent)
		}
	})
	for name, move := range map[string]func(f *fixture){
		"a newer pod": func(f *fixture) { f.w.pod = f.w.pod.DeepCopy(); f.w.pod.ResourceVersion = "6" },
		"a newer CRR": func(f *fixture) { f.w.crrs[0] = f.w.crrs[0].DeepCopy(); f.w.crrs[0].ResourceVersion = "8" },
	} {
		t.Run(name, func(t *testing.T) {
			f := setup("7")
			f.clock.Step(time.Second)
			move(f)
			if f.sync(t); strings.Join(f.w.sent, ",") != "swap" {
				t.Fatalf("writes %v, want the swap decided again at once", f.w.sent)
			}
		})
	}
	t.Run("a CRR without a version holds nothing", func(t *testing.T) {
		f := setup("")
		f.clock.Step(time.Second)
		if f.sync(t); strings.Join(f.w.sent, ",") != "swap" {
			t.Fatalf("writes %v, want the swap decided again at once", f.w.sent)
		}
	})
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
	f := newFixture(pod)
	f.w = w.world
	f.rec = reconciler.New(reconciler.DefaultConfig(), w.world, w, f.ev, f.metrics, f.clock)
	first := decision.CRRName(pod, 1)
	w.live[first] = &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: "default",
		CreationTimestamp: metav1.NewTime(podtest.Epoch.Add(30 * time.Second)),
		Labels:            map[string]string{reconciler.LabelAttempt: "1", reconciler.LabelPodUID: string(pod.UID)}},
		Spec:   kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name, Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating}}
	f.clock.SetTime(podtest.Epoch.Add(31 * time.Second))
	f.sync(t)
	if len(w.sent) != 0 || strings.Join(w.reads, ",") != first {
		t.Fatalf("writes %v, live reads %v; want no write while attempt 1 is in flight, after one read of %s", w.sent, w.reads, first)
	}
}
