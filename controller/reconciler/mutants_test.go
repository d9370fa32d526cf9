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
	f := newFixtureWriting(w.world, w)
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

// correctionWorld is world with an API server whose pod the test sets apart
// from the cache's.
type correctionWorld struct {
	*world
	livePod  *corev1.Pod
	liveErr  error
	podReads int
}

func (w *correctionWorld) LivePod(context.Context, string, string) (*corev1.Pod, error) {
	w.podReads++
	return w.livePod, w.liveErr
}
func (w *correctionWorld) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), name)
}

// A correction of a failed kill (the retry's CRR) is decided from the cache,
// which may lag: the sidecar it shows running may have stopped long ago. So
// the pod is read live first, and the correction is made only if the live
// pod still calls for it: the same version goes ahead; a newer one is
// decided again (the sidecar stopped: nothing to write); a pod gone or
// replaced is not written to; a failed read is an error. The happy path (no
// failed kill) reads nothing.
func TestACorrectionIsDecidedAgainOnTheLivePod(t *testing.T) {
	pod := donePod("p", "normal", markCRR)
	pod.ResourceVersion = "5"
	pod.Annotations = map[string]string{decision.AnnotationCRRAttempts: "1"}
	failed := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: decision.CRRName(pod, 1), CreationTimestamp: metav1.NewTime(podtest.Epoch),
			ResourceVersion: "3", Labels: map[string]string{reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: "1"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{
			{Name: "log", StatusContext: &kruisev1alpha1.ContainerRecreateRequestContainerContext{RestartCount: 0}}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted,
			CompletionTime: &metav1.Time{Time: podtest.Epoch.Add(10 * time.Second)}},
	}
	stopped := pod.DeepCopy()
	stopped.ResourceVersion = "6"
	stopped.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137,
		FinishedAt: metav1.NewTime(podtest.Epoch.Add(12 * time.Second))}}
	replaced := pod.DeepCopy()
	replaced.UID, replaced.ResourceVersion = "p-uid-2", "7"
	retry := "annotate " + decision.AnnotationCRRAttempts + ",crr " + decision.CRRName(pod, 2)
	record := "annotate " + decision.AnnotationCRRAttempts
	for name, tc := range map[string]struct {
		live *corev1.Pod
		err  error
		// early: within the retry's backoff, when the correction is only
		// recording the failed attempt on the pod.
		early   bool
		writes  string
		fails   bool
		ignored bool
	}{
		"the live pod is the cache's":                 {live: pod, writes: retry},
		"the sidecar stopped since":                   {live: stopped},
		"the live pod is the cache's, in the backoff": {live: pod, early: true, writes: record},
		"the sidecar stopped since, in the backoff":   {live: stopped, early: true},
		"the pod is gone":                             {err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p"), ignored: true},
		"the pod was replaced":                        {live: replaced, ignored: true},
		"the read fails":                              {err: apierrors.NewInternalError(errors.New("etcd")), fails: true},
	} {
		t.Run(name, func(t *testing.T) {
			cached := pod
			if tc.early {
				cached = pod.DeepCopy()
				cached.Annotations = nil
			}
			f := newFixture(cached)
			w := &correctionWorld{world: f.w, livePod: tc.live, liveErr: tc.err}
			f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, w, f.ev, f.metrics, f.clock)
			f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{failed}
			if !tc.early {
				f.clock.SetTime(podtest.Epoch.Add(10*time.Second + time.Minute))
			}
			_, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "p"})
			if tc.fails {
				if err == nil || !strings.Contains(err.Error(), "live before correcting a kill") {
					t.Fatalf("Sync: %v, want the failed live read", err)
				}
			} else if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if got := strings.Join(f.w.sent, ","); got != tc.writes {
				t.Errorf("writes %q, want %q", got, tc.writes)
			}
			if w.podReads != 1 {
				t.Errorf("live pod reads %d, want 1", w.podReads)
			}
			if got := testutil.ToFloat64(f.metrics.Decisions.WithLabelValues(string(decision.VerdictIgnored))); tc.ignored && got != 1 {
				t.Errorf("%v decisions %s, want 1", got, decision.VerdictIgnored)
			}
			if !tc.fails && !tc.ignored && decisions(f.metrics) != 1 {
				t.Errorf("%v decisions counted, want 1 with a verdict", decisions(f.metrics))
			}
		})
	}
	t.Run("no failed kill, no read", func(t *testing.T) {
		fresh := donePod("q", "normal", markCRR)
		f := newFixture(fresh)
		w := &correctionWorld{world: f.w, livePod: fresh}
		f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, w, f.ev, f.metrics, f.clock)
		f.sync(t)
		if w.podReads != 0 || strings.Join(f.w.sent, ",") != "crr "+decision.CRRName(fresh, 1) {
			t.Errorf("live pod reads %d, writes %v; want none and the first CRR", w.podReads, f.w.sent)
		}
	})
}

// An update between two versions the decision ignores outright (here both
// finished) is dropped only when they are the same pod: a pod replaced by
// another of the same name matters (the sync forgets the old one), even when
// neither is eligible.
func TestPodUpdateBetweenIgnoredVersionsMattersOnlyForAnotherPod(t *testing.T) {
	old := podtest.Pod("p").UID("uid-1").Phase(corev1.PodSucceeded).Container("main", exitedAt).Container("log", markCRR).Build()
	for _, tc := range []struct {
		name    string
		change  func(p *corev1.Pod)
		matters bool
	}{
		{"the same pod, annotated", func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} }, false},
		{"another pod of the same name", func(p *corev1.Pod) { p.UID = "uid-2" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			new := old.DeepCopy()
			tc.change(new)
			if decision.Eligible(old) || decision.Eligible(new) {
				t.Fatal("want two versions the decision ignores")
			}
			if got := reconciler.PodUpdateMatters(old, new); got != tc.matters {
				t.Errorf("PodUpdateMatters = %v, want %v", got, tc.matters)
			}
		})
	}
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

// A sidecar marked for both ways is stopped by CRR on a normal node and by
// the image swap on a node the virtual-node selector matches (no
// kruise-daemon there); with no selector configured, no node is virtual.
func TestVirtualNodeSelectorChoosesTheSwap(t *testing.T) {
	both := []podtest.Option{markCRR, markImage}
	for _, tc := range []struct {
		name     string
		node     string
		selector bool
		want     decision.ActionKind
	}{
		{"normal node", "normal", true, decision.ActionCreateCRR},
		{"virtual node", "vk", true, decision.ActionSwapImage},
		{"virtual node, no selector", "vk", false, decision.ActionCreateCRR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _, _ := newAPI(t, donePod("p", tc.node, both...))
			cfg := reconciler.DefaultConfig()
			if !tc.selector {
				cfg.VirtualNodeSelector = nil
			}
			rec := reconciler.New(cfg, a, a, a, nil, a.clock)
			plan, err := rec.Plan(a.cachedPods["p"], a.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Actions) != 1 || plan.Actions[0].Kind != tc.want {
				t.Errorf("plan %+v, want one %s", plan.Actions, tc.want)
			}
		})
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
	rec := reconciler.New(reconciler.DefaultConfig(), r, a, a, nil, a.clock)
	plan, err := rec.ExplainPlan(a.cachedPods["p"], a.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r.lists != 1 || len(plan.CRRs) != 1 {
		t.Errorf("%d CRR lists, %d CRRs in the plan; want 1 and 1", r.lists, len(plan.CRRs))
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

// A stage's CRR delete that got no answer may have been applied: it is
// remembered as deleted, so when the cache then drops the CRR the next stage
// goes on (its CRR, after the refusal's backoff), and the delete is not sent
// again for a CRR the pod no longer has.
func TestAStageDeleteWithoutAnswerCountsAsMaybeDone(t *testing.T) {
	pod := shipperPod(podtest.Exited(0, podtest.Epoch.Add(11*time.Second))).Build()
	f := newFixture(pod)
	st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
	f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{stageCRR(st1, 1, "fluent-bit")}
	f.w.answers["delete "+st1] = []error{apierrors.NewTimeoutError("no answer", 1)}
	f.clock.SetTime(podtest.Epoch.Add(50 * time.Second))
	after := f.sync(t)
	if got := strings.Join(f.w.sent, ","); got != "delete "+st1 {
		t.Fatalf("first sync: writes %s, want delete %s", got, st1)
	}
	// It was applied: the cache drops the CRR.
	f.w.crrs, f.w.sent = nil, nil
	f.clock.Step(after)
	f.sync(t)
	if got, want := strings.Join(f.w.sent, ","), "crr "+st2; got != want {
		t.Fatalf("after the backoff: writes %s, want %s", got, want)
	}
}

// The swap's follow-through counts from the swap itself: a sidecar swapped
// five minutes after the mains exited (its CRR path failed first, say) has
// the pod's grace plus the start allowance from then, not from the mains'
// exit, before it is called stuck.
func TestASwapIsFollowedFromWhenItWasMade(t *testing.T) {
	a, rec, _ := newAPI(t, donePod("p", "vk", markImage))
	a.clock.SetTime(podtest.Epoch.Add(10*time.Second + 5*time.Minute))
	mustSync(t, rec, "p")
	if a.pods["p"].Spec.Containers[1].Image != quickExit {
		t.Fatalf("not swapped: writes %v", a.writes)
	}
	a.catchUp() // swapped, still running: the kubelet has not restarted it yet
	a.clock.Step(time.Second)
	bound := 30*time.Second + decision.DefaultPolicy().SwapStartAllowance
	if after := mustSync(t, rec, "p"); after != bound-time.Second || countEvents(a, "Warning "+decision.ReasonQuickExitNotRunning) != 0 {
		t.Errorf("a second after the swap: requeue %s, events %v; want %s and no %s", after, a.events, bound-time.Second, decision.ReasonQuickExitNotRunning)
	}
}

// When OpenKruise's terminator is noticed on a pod, the log line that says
// the controller yields names kruise's CRR.
func TestYieldingToKruiseLogsItsCRR(t *testing.T) {
	p1 := donePod("p1", "normal", markCRR)
	w, rec, _ := newKruiseAPI(t, p1)
	w.kruiseActs(p1, "log")
	var buf bytes.Buffer
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))))
	key := cache.ObjectName{Namespace: "default", Name: "p1"}
	if _, err := rec.Sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	w.catchUp()
	w.setCRRPhase(decision.CRRName(p1, 1), kruisev1alpha1.ContainerRecreateRequestPending)
	w.clock.Step(time.Second)
	if _, err := rec.Sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "yields to it") {
			line = l
		}
	}
	if want := fmt.Sprintf("kruiseCRR=%q", decision.KruiseTerminatorCRRName(p1)); !strings.Contains(line, want) {
		t.Errorf("log line %q, want %s", line, want)
	}
}

// explain looks for OpenKruise's own terminator's CRR whatever the signals
// say (a sync reads it only when our CRR waits behind it), and reports it.
func TestExplainLooksForKruisesTerminator(t *testing.T) {
	for _, kruiseActs := range []bool{true, false} {
		pod := donePod("p", "normal", markCRR)
		w, rec, _ := newKruiseAPI(t, pod)
		if kruiseActs {
			w.kruiseActs(pod, "log")
		}
		plan, err := rec.ExplainPlan(w.cachedPods["p"], w.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if w.gets != 1 {
			t.Errorf("kruise acts %v: %d reads of kruise's CRR, want 1", kruiseActs, w.gets)
		}
		if got := plan.SecondTerminator != nil && plan.SecondTerminator.CRR == decision.KruiseTerminatorCRRName(pod); got != kruiseActs {
			t.Errorf("kruise acts %v: plan's second terminator %+v", kruiseActs, plan.SecondTerminator)
		}
	}
}

// A pod add or a CRR event queues the pod only when the decision does not
// ignore it outright; an add of nothing (a tombstone) always does, a CRR
// event for a pod not in the cache never.
func TestAddAndCRREventFilters(t *testing.T) {
	eligible := donePod("p", "normal", markCRR)
	finished := podtest.Pod("p").Phase(corev1.PodSucceeded).Container("main", exitedAt).Container("log", markCRR, exitedAt).Build()
	if decision.Eligible(finished) || !decision.Eligible(eligible) {
		t.Fatal("want one pod the decision ignores and one it does not")
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		add, crr bool
	}{
		{"nil", nil, true, false},
		{"eligible", eligible, true, true},
		{"finished", finished, false, false},
	} {
		if got := reconciler.PodAddMatters(tc.pod); got != tc.add {
			t.Errorf("%s: PodAddMatters = %v, want %v", tc.name, got, tc.add)
		}
		if got := reconciler.CRREventMatters(tc.pod); got != tc.crr {
			t.Errorf("%s: CRREventMatters = %v, want %v", tc.name, got, tc.crr)
		}
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

// Any other 4xx (a webhook's own code) is a permanent refusal; a 5xx is not.
func TestOtherClientErrorsAreRefusedForGood(t *testing.T) {
	for _, tc := range []struct {
		code      int32
		permanent bool
	}{{418, true}, {400, true}, {499, true}, {500, false}} {
		f := newFixture(jobPod(markImage))
		f.w.answers["swap"] = []error{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: tc.code,
			Reason: metav1.StatusReasonGone, Message: "webhook says no"}}}
		f.sync(t)
		class := "transient"
		if tc.permanent {
			class = "permanent"
		}
		if got := testutil.ToFloat64(f.metrics.Refusals.WithLabelValues(string(decision.ActionSwapImage), class)); got != 1 {
			t.Errorf("HTTP %d: %v %s refusals, want 1", tc.code, got, class)
		}
	}
}

// The defaults keep their reasons: the daemon grace gives kruise-daemon more
// than the minute kruise itself gives it to answer a CRR, and the retry
// back-off's ceiling is above its base.
func TestDefaultsKeepTheirReasons(t *testing.T) {
	if reconciler.DefaultKruiseDaemonGrace <= time.Minute {
		t.Errorf("DefaultKruiseDaemonGrace %s, not more than kruise's one-minute response timeout", reconciler.DefaultKruiseDaemonGrace)
	}
	if reconciler.RetryMaxDelay <= reconciler.RetryBaseDelay || reconciler.RetryBaseDelay <= 0 {
		t.Errorf("retry delays base %s, max %s", reconciler.RetryBaseDelay, reconciler.RetryMaxDelay)
	}
}

// Once OpenKruise's terminator is known to act in the cluster, a pod's first
// CRR (past the wait for kruise's CRR: the mains ended long ago) looks for
// kruise's CRR once first: one there is warned about and counted.
func TestAFirstCRRLooksForKruisesOnceKruiseIsKnown(t *testing.T) {
	for _, kruiseActs := range []bool{true, false} {
		pod := donePod("p", "normal", markCRR)
		w, rec, m := newKruiseAPI(t, pod)
		rec.KruiseTerminatorSeen()
		if kruiseActs {
			w.kruiseActs(pod, "log")
		}
		w.clock.Step(decision.SecondTerminatorGrace + time.Minute)
		mustSync(t, rec, "p")
		warned := countEvents(w.apiFake, "Warning "+decision.ReasonSecondTerminator) == 1 && testutil.ToFloat64(m.SecondTerminatorPods) == 1
		if w.gets != 1 || warned != kruiseActs {
			t.Errorf("kruise acts %v: %d reads of kruise's CRR, warned and counted %v (events %v); want 1 read, %v", kruiseActs, w.gets, warned, w.events, kruiseActs)
		}
	}
}

// liveAPI is apiFake with an API server to read from directly, whose
// answers the test sets: a CRR by name (nil: not found), the pod.
type liveAPI struct {
	*apiFake
	crrs    map[string]*kruisev1alpha1.ContainerRecreateRequest
	crrErr  error
	pod     *corev1.Pod
	podErr  error
	podGets int
}

func (l *liveAPI) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	if l.crrErr != nil {
		return nil, l.crrErr
	}
	if c := l.crrs[name]; c != nil {
		return c, nil
	}
	return nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), name)
}

func (l *liveAPI) LivePod(context.Context, string, string) (*corev1.Pod, error) {
	l.podGets++
	if l.podErr != nil {
		return nil, l.podErr
	}
	if l.pod == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	}
	return l.pod, nil
}

// A write the cache has not shown by the expectation's timeout is checked at
// the API server: in effect there (our CRR made, the CRR deleted, the pod
// swapped), the cache only lags and the pod keeps waiting; not in effect
// (none, someone else's CRR, the CRR still there, the pod gone or
// replaced), it is decided afresh, and counted; a failed read is an error.
func TestAnUnseenWriteIsCheckedLive(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("etcd"))
	type result int
	const (
		waits result = iota
		afresh
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
		{"pod gone", donePod("p", "vk", markImage), false, func(*liveAPI, *apiFake) {}, afresh},
		{"pod replaced", donePod("p", "vk", markImage), false, func(l *liveAPI, a *apiFake) {
			l.pod = a.pods["p"].DeepCopy()
			l.pod.UID = "other"
		}, afresh},
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
			rec := reconciler.New(reconciler.DefaultConfig(), a, l, a, m, a.clock)
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
			case fails:
				if err == nil || !strings.Contains(err.Error(), "unseen writes live") || decisions(m) != seen {
					t.Errorf("Sync %v, %v decisions; want the failed read, nothing decided", err, decisions(m)-seen)
				}
			}
		})
	}
}
