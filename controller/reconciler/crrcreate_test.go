package reconciler_test

import (
	"context"
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
		retry := len(plan.Actions) > 0 && plan.Actions[0].Kind == decision.ActionCreateCRR && plan.Actions[0].Attempt == 2
		if retry != tc.retry {
			t.Errorf("%s after the CRR's creation: plan %+v (%s); want a retry: %v", tc.at, plan.Actions, plan.Verdict, tc.retry)
		}
	}
}

// A CRR create answered 404 for the pod (kruise's webhook names the pod it
// did not find) is a stale write, the pod gone: no refusal, no rediscovery
// of the CRR API (kept for a 404 of the CRR resource itself).
func TestCRRCreateNotFoundForThePodIsStale(t *testing.T) {
	f := newFixture(jobPod(markCRR, markImage))
	f.w.answers["crr "+decision.CRRName(f.w.pod, 1)] = []error{apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")}
	_, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: f.w.pod.Namespace, Name: f.w.pod.Name})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Sync: %v, want the stale write's 404", err)
	}
	if f.w.rediscover != 0 || len(f.ev.warnings(decision.ReasonSidecarKillFailed)) != 0 || strings.Join(f.w.sent, ",") != "crr "+decision.CRRName(f.w.pod, 1) {
		t.Errorf("rediscoveries %d, Warnings %+v, writes %v; want none, none, the CRR only", f.w.rediscover, f.ev.list, f.w.sent)
	}
}
