package reconciler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

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
		crr := inFlightCRR(pod, "log", 600)
		crr.ResourceVersion = crrVersion
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

// A sync with a write still unseen looks again at the earlier of the plan's
// own wait and the expectation's timeout: a write whose effect never reaches
// the cache is revisited in time, and a plan that needs to look sooner is
// not put off to the timeout. Here the log's CRR is in flight (its deadline
// 600 s after its creation, which the plan waits for) and the proxy is
// swapped.
func TestRequeueIsTheEarlierOfThePlansWaitAndTheExpectation(t *testing.T) {
	for _, tc := range []struct {
		name        string
		expectation time.Duration
		plan        bool // the plan's wait comes first
	}{
		{"the expectation first", time.Minute, false},
		{"the plan first", 15 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Pod("p").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
				Container("log", markCRR).Container("proxy", markImage).Build()
			cfg := reconciler.DefaultConfig()
			cfg.ExpectationTimeout = tc.expectation
			f := newFixtureWith(pod, cfg)
			f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{inFlightCRR(pod, "log", 600)}
			plan, err := f.rec.Plan(f.w.pod, f.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if plan.RequeueAfter <= time.Minute || plan.RequeueAfter >= 15*time.Minute {
				t.Fatalf("the plan waits %s; want between the two expectation timeouts", plan.RequeueAfter)
			}
			want := tc.expectation
			if tc.plan {
				want = plan.RequeueAfter
			}
			if after := f.sync(t); strings.Join(f.w.sent, ",") != "swap" || after != want {
				t.Errorf("writes %v, requeue %s; want the swap and %s (the plan waits %s, the expectation %s)", f.w.sent, after, want, plan.RequeueAfter, tc.expectation)
			}
		})
	}
}

// inFlightCRR is our first CRR for the pod's container, created 10 s after
// the epoch with the given deadline, which kruise-daemon holds Recreating.
func inFlightCRR(pod *corev1.Pod, container string, deadline int64) *kruisev1alpha1.ContainerRecreateRequest {
	return &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: decision.CRRName(pod, 1), Namespace: "default",
		CreationTimestamp: metav1.NewTime(podtest.Epoch.Add(10 * time.Second)),
		Labels:            map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: "1"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name, ActiveDeadlineSeconds: &deadline,
			Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: container}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating}}
}

// A write whose effect never reached the cache is decided afresh after the
// timeout, and the log line that says so names each unseen write, the CRR
// by name: the only sign an operator gets that the cache and the cluster
// disagree.
func TestExpectationTimeoutLogNamesTheUnseenWrites(t *testing.T) {
	pod := donePod("p", "normal", markCRR)
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"crr":  {pod, fmt.Sprintf("pending=[%q]", string(decision.ActionCreateCRR)+" "+decision.CRRName(pod, 1))},
		"swap": {donePod("p", "vk", markImage), fmt.Sprintf("pending=[%q]", string(decision.ActionSwapImage))},
	} {
		t.Run(name, func(t *testing.T) {
			a, rec, _ := newAPI(t, tc.pod)
			var buf bytes.Buffer
			ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))))
			key := cache.ObjectName{Namespace: "default", Name: "p"}
			if _, err := rec.Sync(ctx, key); err != nil {
				t.Fatal(err)
			}
			// The write is undone behind the cache's back.
			a.crrs, a.pods["p"] = nil, tc.pod
			a.clock.Step(time.Minute)
			buf.Reset()
			if _, err := rec.Sync(ctx, key); err != nil {
				t.Fatal(err)
			}
			var line string
			for _, l := range strings.Split(buf.String(), "\n") {
				if strings.Contains(l, "Expectation timed out") {
					line = l
				}
			}
			if !strings.Contains(line, tc.want) {
				t.Errorf("log line %q, want it to name %s\n%s", line, tc.want, buf.String())
			}
		})
	}
}

// A stage's CRR deleted (and the next stage's created) is awaited until the
// cache shows both: the deleted CRR gone and the new one there; then the
// pod is decided again at once.
func TestADeleteIsAwaitedUntilTheCacheDropsTheCRR(t *testing.T) {
	pod := podtest.Pod("p").Namespace("default").UID("p-uid-1").Node("normal").Annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy").
		Container("main", exitedAt).
		Container("fluent-bit", markCRR, podtest.Exited(0, podtest.Epoch.Add(11*time.Second))).
		Container("istio-proxy", markCRR).Build()
	a, rec, m := newAPI(t, pod)
	st1 := stageCRR(decision.StageCRRName(pod, 1, 1), 1, "fluent-bit")
	st1.Labels[reconciler.LabelPodUID] = string(pod.UID)
	a.crrs = append(a.crrs, st1)
	a.catchUp()
	a.clock.SetTime(podtest.Epoch.Add(50 * time.Second))
	mustSync(t, rec, "p")
	if got := strings.Join(a.writes, ","); got != "delete,crr" {
		t.Fatalf("writes %s, want delete,crr", got)
	}
	seen := decisions(m)
	a.catchUp()
	a.clock.Step(time.Second)
	mustSync(t, rec, "p")
	if decisions(m) != seen+1 {
		t.Errorf("the cache shows both writes: %v decisions, want the pod decided again at once", decisions(m)-seen)
	}
}

// A write the cache has not shown by the expectation's timeout is checked at
// the API server (the plan's confirm step): in effect there (our CRR made,
// the CRR deleted, the pod swapped), the cache only lags and the pod keeps
// waiting; not in effect (none, someone else's CRR, the CRR still there),
// it is decided afresh, and counted; the pod gone or replaced is not written
// to; a failed read is an error.
func TestAnUnseenWriteIsCheckedLive(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("etcd"))
	type result int
	const (
		waits result = iota
		afresh
		gone
		fails
	)
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		order bool // a stop order whose stage-1 CRR is deleted and stage 2's made
		live  func(l *liveAPI, truth *apiFake)
		want  result
	}{
		{"our CRR made", donePod("p", "normal", markCRR), false, func(l *liveAPI, a *apiFake) { l.crrs[a.crrs[0].Name] = a.crrs[0] }, waits},
		{"no CRR", donePod("p", "normal", markCRR), false, func(*liveAPI, *apiFake) {}, afresh},
		{"someone else's CRR", donePod("p", "normal", markCRR), false, func(l *liveAPI, a *apiFake) {
			c := a.crrs[0].DeepCopy()
			c.Labels[reconciler.LabelManagedBy] = "someone-else"
			l.crrs[c.Name] = c
		}, afresh},
		{"CRR read fails", donePod("p", "normal", markCRR), false, func(l *liveAPI, _ *apiFake) { l.crrErr = internal }, fails},
		{"deleted and made", nil, true, func(l *liveAPI, a *apiFake) { l.crrs[a.crrs[0].Name] = a.crrs[0] }, waits},
		{"not deleted", nil, true, func(l *liveAPI, a *apiFake) {
			l.crrs[a.crrs[0].Name] = a.crrs[0]
			st1 := decision.StageCRRName(a.pods["p"], 1, 1)
			l.crrs[st1] = stageCRR(st1, 1, "fluent-bit")
		}, afresh},
		{"pod swapped", donePod("p", "vk", markImage), false, func(l *liveAPI, a *apiFake) { l.pod = a.pods["p"] }, waits},
		{"pod gone", donePod("p", "vk", markImage), false, func(*liveAPI, *apiFake) {}, gone},
		{"pod replaced", donePod("p", "vk", markImage), false, func(l *liveAPI, a *apiFake) {
			l.pod = a.pods["p"].DeepCopy()
			l.pod.UID = "other"
		}, gone},
		{"pod read fails", donePod("p", "vk", markImage), false, func(l *liveAPI, _ *apiFake) { l.podErr = internal }, fails},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod
			if tc.order {
				pod = podtest.Pod("p").Namespace("default").UID("uid1").Node("normal").Annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy").
					Container("main", exitedAt).Container("fluent-bit", markCRR, podtest.Exited(0, podtest.Epoch.Add(11*time.Second))).
					Container("istio-proxy", markCRR).Build()
			}
			a, _, m := newAPI(t, pod)
			if tc.order {
				st1 := stageCRR(decision.StageCRRName(pod, 1, 1), 1, "fluent-bit")
				st1.Labels[reconciler.LabelPodUID] = string(pod.UID)
				a.crrs = append(a.crrs, st1)
				a.catchUp()
				a.clock.SetTime(podtest.Epoch.Add(50 * time.Second))
			}
			l := &liveAPI{apiFake: a, crrs: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
			rec := reconciler.New(reconciler.DefaultConfig(), a, a, l, a, m, a.clock)
			mustSync(t, rec, "p")
			if tc.order && strings.Join(a.writes, ",") != "delete,crr" {
				t.Fatalf("writes %v, want delete,crr", a.writes)
			}
			writes := len(a.writes)
			tc.live(l, a)
			seen := decisions(m)
			a.clock.Step(time.Minute)
			after, err := syncPod(t, rec, "p")
			timedOut := testutil.ToFloat64(m.ExpectationsTimedOut)
			switch tc.want {
			case waits:
				if err != nil || after != time.Minute || decisions(m) != seen || timedOut != 0 || len(a.writes) != writes {
					t.Errorf("Sync %v, requeue %s, %v decisions, %v timed out, writes %v; want a wait of 1m, nothing decided or written",
						err, after, decisions(m)-seen, timedOut, a.writes)
				}
			case afresh:
				// Deciding afresh may send the write again, which the API
				// server (where it is in effect) refuses as stale.
				if decisions(m) != seen+1 || timedOut != 1 {
					t.Errorf("Sync %v, %v decisions, %v timed out; want the pod decided afresh, counted", err, decisions(m)-seen, timedOut)
				}
			case gone:
				// Not written to: the cache's delete event brings the pod
				// back, and it is forgotten.
				ignored := testutil.ToFloat64(m.Decisions.WithLabelValues(string(decision.VerdictIgnored)))
				if err != nil || ignored != 1 || timedOut != 1 || len(a.writes) != writes {
					t.Errorf("Sync %v, %v ignored, %v timed out, writes %v; want the pod ignored, counted, nothing written", err, ignored, timedOut, a.writes)
				}
			case fails:
				if err == nil || !strings.Contains(err.Error(), "read live what the plan") || decisions(m) != seen {
					t.Errorf("Sync %v, %v decisions; want the failed read, nothing decided", err, decisions(m)-seen)
				}
			}
		})
	}
}

// A write's expectation is counted from its answer. When the answer came
// late and the cache never shows the write, the look the sync asks for is the
// one at which the expectation has timed out: the pod is decided afresh
// then, not told to wait once more. Afresh, but knowing the CRR it made:
// kruise-daemon may be stopping the sidecar under it, so it is not made
// again (podmemory.go, madeCRR).
func TestSlowUnseenWriteIsRevisitedWhenItsExpectationTimesOut(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	slow := slowWorld{world: f.w, clock: f.clock, delay: 5 * time.Second}
	f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, slow, f.w, f.ev, f.metrics, f.clock)
	after := f.sync(t)
	if f.creates() != 1 {
		t.Fatalf("first sync wrote %v, want one create", f.w.sent)
	}
	f.clock.Step(after)
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.ExpectationsTimedOut); got != 1 || f.creates() != 1 {
		t.Fatalf("at the look asked for (%s later): expectations timed out %v, writes %v; want the pod decided afresh", after, got, f.w.sent)
	}
}

// An expectation that is already over when the sync ends (here a zero
// expectation timeout) still gets the pod looked at again: a requeue of zero
// would mean never, and the unseen write would be left alone.
func TestExpectationOverAtTheEndOfTheSyncStillRequeues(t *testing.T) {
	cfg := reconciler.DefaultConfig()
	cfg.ExpectationTimeout = 0
	f := newFixtureWith(jobPod(markCRR), cfg)
	after := f.sync(t)
	if f.creates() != 1 || after <= 0 {
		t.Fatalf("writes %v, requeue %s; want one create and a later look", f.w.sent, after)
	}
	f.clock.Step(after)
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.ExpectationsTimedOut); got != 1 || f.creates() != 1 {
		t.Fatalf("the unseen write was not decided afresh (%v timed out), or its CRR was made again: %v", got, f.w.sent)
	}
}
