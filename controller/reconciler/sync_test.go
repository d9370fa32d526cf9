package reconciler_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// apiFake is an in-memory API server and informer cache behind the
// reconciler's Reader and Writer. Writes land in the truth at once, applied
// as the API server applies them (JSON patches by the same library); the
// Reader shows the cache, which catches up only when the test says so, as
// informers lag.
type apiFake struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	nodes map[string]map[string]string

	pods, cachedPods map[string]*corev1.Pod
	crrs, cachedCRRs []*kruisev1alpha1.ContainerRecreateRequest

	fail            map[string]error // the next write of a kind ("crr", "patch", "status", "annotate") fails with it
	writes          []string
	events          []string // "Warning Reason" or "Normal Reason"
	readErr, crrErr error
	podReads        int // the reconciler's reads of the pod from the cache
}

func newAPI(t *testing.T, pods ...*corev1.Pod) (*apiFake, *reconciler.Reconciler, *reconciler.Metrics) {
	a := &apiFake{t: t, clock: clocktesting.NewFakeClock(podtest.Epoch.Add(11 * time.Second)),
		nodes: map[string]map[string]string{"normal": {}, "vk": {"type": "virtual-kubelet"}},
		pods:  map[string]*corev1.Pod{}, fail: map[string]error{}}
	for _, p := range pods {
		a.pods[p.Name] = p
	}
	a.catchUp()
	m := reconciler.NewMetrics(nil)
	return a, reconciler.New(reconciler.DefaultConfig(), a, a, a, a, m, a.clock), m
}

// catchUp makes the cache show the truth.
func (a *apiFake) catchUp() {
	a.cachedPods = map[string]*corev1.Pod{}
	for k, p := range a.pods {
		a.cachedPods[k] = p.DeepCopy()
	}
	a.cachedCRRs = nil
	for _, c := range a.crrs {
		a.cachedCRRs = append(a.cachedCRRs, c.DeepCopy())
	}
}

func (a *apiFake) Pod(_, name string) (*corev1.Pod, error) {
	a.podReads++
	if a.readErr != nil {
		return nil, a.readErr
	}
	if p := a.cachedPods[name]; p != nil {
		return p, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

// PodConsidered is reconciler.ConsideredReader, as kube's pod cache answers it.
func (a *apiFake) PodConsidered(_, name string) (considered, held bool) {
	p := a.cachedPods[name]
	if p == nil {
		return false, false
	}
	return decision.Considered(p), true
}

func (a *apiFake) Node(name string) (decision.NodeFacts, bool) {
	l, ok := a.nodes[name]
	return decision.NodeFacts{Name: name, Labels: l}, ok
}

func (a *apiFake) CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	var out []*kruisev1alpha1.ContainerRecreateRequest
	for _, c := range a.cachedCRRs {
		if c.Labels[reconciler.LabelPodUID] == string(pod.UID) {
			out = append(out, c)
		}
	}
	return out, a.crrErr
}

func (a *apiFake) CRRAPIAvailable() bool { return true }
func (a *apiFake) RediscoverCRRAPI()     {}

// KruiseDaemon: the fake has no NodeImages, so nothing is known of the
// daemons (a CRR is tried), as where OpenKruise's NodeImage API is not served.
func (a *apiFake) KruiseDaemon(string, time.Time, time.Duration) (decision.DaemonState, string) {
	return decision.DaemonUnknown, ""
}

// KruiseTerminatorCRR: OpenKruise's own SidecarTerminator makes no CRR in
// this API server (withKruise's does).
func (a *apiFake) KruiseTerminatorCRR(context.Context, *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return nil, nil
}

// LivePod, LiveCRR and LiveJob read the truth, not the cache, as the
// reconciler's live reads read the API server; the fake holds no Job.
func (a *apiFake) LivePod(_ context.Context, _, name string) (*corev1.Pod, error) {
	if p := a.pods[name]; p != nil {
		return p.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (a *apiFake) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	for _, c := range a.crrs {
		if c.Name == name {
			return c.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}, name)
}

func (a *apiFake) LiveJob(_ context.Context, _, name string) (*batchv1.Job, error) {
	return nil, apierrors.NewNotFound(batchv1.Resource("jobs"), name)
}

func (a *apiFake) failed(kind string) error {
	a.writes = append(a.writes, kind)
	err := a.fail[kind]
	delete(a.fail, kind)
	return err
}

func (a *apiFake) CreateCRR(_ context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, readPodFirst bool) error {
	if err := a.failed("crr"); err != nil {
		return err
	}
	for _, c := range a.crrs {
		if c.Name == crr.Name {
			return apierrors.NewAlreadyExists(schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}, crr.Name)
		}
	}
	if p := a.pods[crr.Spec.PodName]; readPodFirst && (p == nil || p.UID != crr.OwnerReferences[0].UID) {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, crr.Spec.PodName, errors.New("replaced"))
	}
	crr = crr.DeepCopy()
	crr.CreationTimestamp = metav1.NewTime(a.clock.Now())
	a.crrs = append(a.crrs, crr)
	return nil
}

func (a *apiFake) DeleteCRR(_ context.Context, _, name string) error {
	if err := a.failed("delete"); err != nil {
		return err
	}
	for i, c := range a.crrs {
		if c.Name == name {
			a.crrs = append(a.crrs[:i], a.crrs[i+1:]...)
			break
		}
	}
	return nil
}

func (a *apiFake) patch(kind, name string, patch []byte) error {
	if err := a.failed(kind); err != nil {
		return err
	}
	p := a.pods[name]
	if p == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		a.t.Fatalf("%s: not a JSON patch: %v\n%s", kind, err, patch)
	}
	doc, err := json.Marshal(p)
	if err != nil {
		a.t.Fatal(err)
	}
	if doc, err = ops.Apply(doc); err != nil {
		// What the API server answers a patch that does not apply.
		return apierrors.NewGenericServerResponse(422, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(doc, out); err != nil {
		a.t.Fatal(err)
	}
	a.pods[name] = out
	return nil
}

func (a *apiFake) PatchPod(_ context.Context, _, name string, patch []byte) error {
	return a.patch("patch", name, patch)
}

func (a *apiFake) PatchPodStatus(_ context.Context, _, name string, patch []byte) error {
	return a.patch("status", name, patch)
}

func (a *apiFake) AnnotatePod(_ context.Context, _, name string, uid types.UID, key, value string) error {
	if err := a.failed("annotate"); err != nil {
		return err
	}
	p := a.pods[name]
	if p == nil || p.UID != uid {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, name, errors.New("uid"))
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
	return nil
}

func (a *apiFake) Event(_ runtime.Object, eventtype, reason, _ string) {
	a.events = append(a.events, eventtype+" "+reason)
}

func syncPod(t *testing.T, rec *reconciler.Reconciler, name string) (time.Duration, error) {
	t.Helper()
	return rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: name})
}

func mustSync(t *testing.T, rec *reconciler.Reconciler, name string) time.Duration {
	t.Helper()
	after, err := syncPod(t, rec, name)
	if err != nil {
		t.Fatalf("Sync %s: %v", name, err)
	}
	return after
}

func decisions(m *reconciler.Metrics) float64 {
	total := 0.0
	for _, v := range []decision.Verdict{decision.VerdictAct, decision.VerdictInProgress, decision.VerdictDone, decision.VerdictNoPath, decision.VerdictMainsActive} {
		total += testutil.ToFloat64(m.Decisions.WithLabelValues(string(v)))
	}
	return total
}

var (
	exitedAt = podtest.Exited(0, podtest.Epoch.Add(10*time.Second))
	ignoreRC = podtest.Env(decision.EnvIgnoreExitCode, "true")
)

func donePod(name, node string, sidecar ...podtest.Option) *corev1.Pod {
	return podtest.Pod(name).Namespace("default").UID(name+"-uid-1").Node(node).
		Container("main", exitedAt).Container("log", sidecar...).Build()
}

// A write raises an expectation: until the cache shows it, the pod is not
// decided again (it would write again). Once the cache shows it, the pod is
// decided at once, not after the expectation's timeout.
func TestSyncWaitsForItsWriteUntilTheCacheShowsIt(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		pod    *corev1.Pod
		writes string
	}{
		{"crr", donePod("p", "normal", markCRR), "crr"},
		{"swap", donePod("p", "vk", markImage), "patch"},
		{"settle", donePod("p", "normal", markCRR, ignoreRC), "status,annotate"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			a, rec, m := newAPI(t, tc.pod)
			mustSync(t, rec, "p")
			if got := strings.Join(a.writes, ","); got != tc.writes {
				t.Fatalf("writes %s, want %s", got, tc.writes)
			}
			seen := decisions(m)
			a.clock.Step(time.Second)
			if after := mustSync(t, rec, "p"); after != 59*time.Second || decisions(m) != seen || len(a.writes) != len(strings.Split(tc.writes, ",")) {
				t.Fatalf("before the cache shows the write: requeue %s, %v decisions, writes %v; want to wait 59s, deciding and writing nothing", after, decisions(m)-seen, a.writes)
			}
			a.catchUp()
			a.clock.Step(time.Second)
			mustSync(t, rec, "p")
			if decisions(m) != seen+1 {
				t.Fatalf("once the cache shows the write the pod is decided again at once; %v decisions", decisions(m)-seen)
			}
			if n := testutil.ToFloat64(m.ExpectationsTimedOut); n != 0 {
				t.Errorf("%v expectations timed out, want 0", n)
			}
		})
	}
}

// A write whose effect the cache never shows, and the API server shows no
// longer (the CRR deleted before the cache listed it), is decided afresh
// after the timeout, and counted; the CRR it made is remembered, not made
// again.
func TestSyncDecidesAfreshWhenAnExpectationTimesOut(t *testing.T) {
	a, rec, m := newAPI(t, donePod("p", "normal", markCRR))
	mustSync(t, rec, "p")
	a.crrs = nil
	a.clock.Step(59 * time.Second)
	mustSync(t, rec, "p")
	if len(a.writes) != 1 {
		t.Fatalf("wrote again within the timeout: %v", a.writes)
	}
	a.clock.Step(time.Second)
	mustSync(t, rec, "p")
	if n := testutil.ToFloat64(m.ExpectationsTimedOut); n != 1 {
		t.Errorf("%v expectations timed out, want 1", n)
	}
	if len(a.writes) != 1 || len(a.crrs) != 0 {
		t.Errorf("after the timeout: writes %v and %d CRRs, want the one create and none", a.writes, len(a.crrs))
	}
}

// A pod deleted and made again under the same name is another pod: nothing
// the reconciler remembers of the old one (warnings given, writes awaited)
// applies to it.
func TestANewPodOfTheSameNameStartsWithNoMemory(t *testing.T) {
	unknown := func(uid string, opts ...podtest.Option) *corev1.Pod {
		return podtest.Pod("p").Namespace("default").UID(uid).Node("normal").Annotate(decision.AnnotationSidecars, "log,nosuch").
			Container("main", exitedAt).Container("log", opts...).Build()
	}
	a, rec, m := newAPI(t, unknown("uid-old", markCRR))
	mustSync(t, rec, "p")
	mustSync(t, rec, "p")
	if len(a.writes) != 1 || strings.Count(strings.Join(a.events, ","), "Warning "+decision.ReasonUnknownSidecarName) != 1 {
		t.Fatalf("old pod: writes %v, events %v; want one CRR and one Warning", a.writes, a.events)
	}
	// The old pod's CRR is still awaited when the new pod shows up.
	a.pods["p"] = unknown("uid-new", markCRR)
	a.catchUp()
	a.clock.Step(time.Second)
	mustSync(t, rec, "p")
	if strings.Count(strings.Join(a.events, ","), "Warning "+decision.ReasonUnknownSidecarName) != 2 {
		t.Errorf("the new pod's own Warning was not given: %v", a.events)
	}
	if len(a.writes) != 2 || len(a.crrs) != 2 || a.crrs[1].Labels[reconciler.LabelPodUID] != "uid-new" {
		t.Errorf("the new pod waited on the old pod's write: writes %v", a.writes)
	}
	// The old pod's place in the pods-tracked gauge goes with its memory.
	if got := testutil.ToFloat64(m.PodsTracked); got != 1 {
		t.Errorf("pods tracked = %v, want 1 (the new pod only)", got)
	}
}

// What is written is what the decision planned, and the API server (the same
// JSON patch library) accepts it on the pod the cache showed.
func TestSyncWritesWhatTheDecisionPlanned(t *testing.T) {
	t.Run("crr", func(t *testing.T) {
		a, rec, _ := newAPI(t, donePod("p", "normal", markCRR))
		mustSync(t, rec, "p")
		if len(a.crrs) != 1 {
			t.Fatalf("CRRs %d, want 1", len(a.crrs))
		}
		c := a.crrs[0]
		pod := a.pods["p"]
		if c.Name != decision.CRRName(pod, 1) || c.Namespace != "default" || c.Spec.PodName != "p" {
			t.Errorf("CRR %s/%s for pod %q", c.Namespace, c.Name, c.Spec.PodName)
		}
		wantLabels := map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: "p-uid-1", reconciler.LabelAttempt: "1"}
		for k, v := range wantLabels {
			if c.Labels[k] != v {
				t.Errorf("label %s=%q, want %q", k, c.Labels[k], v)
			}
		}
		if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != pod.UID || c.OwnerReferences[0].Kind != "Pod" {
			t.Errorf("owner %+v, want the pod", c.OwnerReferences)
		}
		if len(c.Spec.Containers) != 1 || c.Spec.Containers[0].Name != "log" {
			t.Errorf("containers %+v, want log", c.Spec.Containers)
		}
		if d := c.Spec.ActiveDeadlineSeconds; d == nil || *d != 60 {
			t.Errorf("activeDeadlineSeconds %v, want 60", d)
		}
		if ttl := c.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 1800 {
			t.Errorf("ttlSecondsAfterFinished %v, want 1800", ttl)
		}
		if s := c.Spec.Strategy; s == nil || !s.ForceRecreate || s.FailurePolicy != kruisev1alpha1.ContainerRecreateRequestFailurePolicyIgnore {
			t.Errorf("strategy %+v, want forced, failure policy Ignore", s)
		}
		if strings.Join(a.events, ",") != "Normal "+reconciler.ReasonTerminated {
			t.Errorf("events %v", a.events)
		}
	})
	t.Run("swap", func(t *testing.T) {
		a, rec, _ := newAPI(t, donePod("p", "vk", markImage))
		mustSync(t, rec, "p")
		if got := a.pods["p"].Spec.Containers; got[1].Image != quickExit || got[0].Image != "example.com/main:1" {
			t.Errorf("images after the swap: %s, %s", got[0].Image, got[1].Image)
		}
	})
	t.Run("settle", func(t *testing.T) {
		a, rec, _ := newAPI(t, donePod("p", "normal", markCRR, ignoreRC))
		mustSync(t, rec, "p")
		p := a.pods["p"]
		if p.Status.Phase != corev1.PodSucceeded || !decision.HasSidecarTerminatedCondition(p) {
			t.Errorf("phase %s, conditions %+v: want Succeeded and SidecarTerminated", p.Status.Phase, p.Status.Conditions)
		}
		if p.Annotations[reconciler.AnnotationSettled] != a.clock.Now().UTC().Format(time.RFC3339Nano) {
			t.Errorf("settled-at annotation %q", p.Annotations[reconciler.AnnotationSettled])
		}
		// A second condition goes after the first, which stays.
		p2 := donePod("q", "normal", markCRR, ignoreRC)
		p2.Status.Phase = corev1.PodRunning
		p2.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		a.pods["q"] = p2
		a.catchUp()
		mustSync(t, rec, "q")
		if c := a.pods["q"].Status.Conditions; len(c) != 2 || c[0].Type != corev1.PodReady || c[1].Type != decision.ConditionSidecarTerminated {
			t.Errorf("conditions after the settle: %+v", c)
		}
		// A re-settle (the kubelet wrote its phase back) replaces our
		// condition where it is, the first place included: one condition of
		// the type, with the new transition time the grace wait reads.
		p3 := donePod("r", "normal", markCRR, ignoreRC)
		p3.Status.Phase = corev1.PodRunning
		p3.Status.Conditions = []corev1.PodCondition{
			{Type: decision.ConditionSidecarTerminated, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(podtest.Epoch)},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		a.pods["r"] = p3
		a.catchUp()
		mustSync(t, rec, "r")
		c := a.pods["r"].Status.Conditions
		if a.pods["r"].Status.Phase != corev1.PodSucceeded || len(c) != 2 || c[0].Type != decision.ConditionSidecarTerminated ||
			!c[0].LastTransitionTime.Time.Equal(a.clock.Now()) || c[1].Type != corev1.PodReady {
			t.Errorf("phase %s, conditions after the re-settle: %+v", a.pods["r"].Status.Phase, c)
		}
	})
}

// The CRRs in the cache are the decision's memory of earlier attempts.
func TestSyncCountsAttemptsFromTheCRRsLabels(t *testing.T) {
	for _, tc := range []struct {
		label string
		next  int
	}{{"2", 3}, {"edited", 2}, {"0", 2}} {
		pod := donePod("p", "normal", markCRR)
		old := &kruisev1alpha1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "earlier", CreationTimestamp: metav1.NewTime(podtest.Epoch),
				Labels: map[string]string{reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: tc.label}},
			Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{
				{Name: "log", StatusContext: &kruisev1alpha1.ContainerRecreateRequestContainerContext{RestartCount: 0}}}},
			Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted,
				CompletionTime: &metav1.Time{Time: podtest.Epoch}},
		}
		a, rec, m := newAPI(t, pod)
		a.crrs = append(a.crrs, old)
		a.catchUp()
		plan, err := rec.Plan(a.cachedPods["p"], a.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Actions) == 0 || plan.Actions[0].Attempt != tc.next {
			t.Errorf("attempt label %q: plan %+v, want attempt %d", tc.label, plan.Actions, tc.next)
		}
		if decisions(m) != 0 || len(a.writes) != 0 {
			t.Errorf("Plan wrote or counted: %v", a.writes)
		}
		mustSync(t, rec, "p")
		if got := testutil.ToFloat64(m.FailedKills.WithLabelValues(string(decision.ActionCreateCRR))); got != 1 {
			t.Errorf("failed kills %v, want 1 for the earlier CRR", got)
		}
	}
}

// A stale write (the pod moved on under it) is returned for the queue's
// back-off and forgotten, so the next sync decides and writes again at once.
// (Refused writes are the decision's: refusal_test.go.)
func TestSyncReturnsFailedWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		result string
	}{
		{"conflict", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("moved")), reconciler.ResultStale},
		{"pod gone", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p"), reconciler.ResultStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, rec, m := newAPI(t, donePod("p", "vk", markImage))
			a.fail["patch"] = tc.err
			if _, err := syncPod(t, rec, "p"); err == nil || !strings.Contains(err.Error(), "default/p") {
				t.Fatalf("Sync error %v, want the write's error naming the pod", err)
			}
			if got := testutil.ToFloat64(m.Actions.WithLabelValues(string(decision.ActionSwapImage), tc.result)); got != 1 {
				t.Errorf("swaps with result %s: %v, want 1", tc.result, got)
			}
			mustSync(t, rec, "p")
			if len(a.writes) != 2 || a.pods["p"].Spec.Containers[1].Image != quickExit {
				t.Errorf("retry: writes %v", a.writes)
			}
		})
	}
}

func TestSyncReadErrors(t *testing.T) {
	a, rec, _ := newAPI(t, donePod("p", "normal", markCRR))
	a.readErr = errors.New("cache gone")
	if _, err := syncPod(t, rec, "p"); err == nil || !strings.Contains(err.Error(), "read pod default/p") {
		t.Errorf("read error: %v", err)
	}
	a.readErr, a.crrErr = nil, errors.New("index gone")
	if _, err := syncPod(t, rec, "p"); err == nil || !strings.Contains(err.Error(), "list CRRs of pod default/p") {
		t.Errorf("CRR list error: %v", err)
	}
	if len(a.writes) != 0 {
		t.Errorf("wrote on a failed read: %v", a.writes)
	}
}

// The pods-tracked gauge counts pods still to finish; a pod gone or ignored
// leaves it.
func TestPodsTrackedFollowsThePods(t *testing.T) {
	running := podtest.Pod("r").Namespace("default").UID("r-1").Node("normal").Container("main").Container("log", markCRR).Build()
	always := podtest.Pod("a").Namespace("default").UID("a-1").Node("normal").RestartPolicy(corev1.RestartPolicyAlways).
		Container("main").Container("log", markCRR).Build()
	a, rec, m := newAPI(t, running, always, donePod("p", "normal", markCRR))
	for _, name := range []string{"r", "a", "p"} {
		mustSync(t, rec, name)
	}
	if got := testutil.ToFloat64(m.PodsTracked); got != 2 {
		t.Fatalf("tracked %v, want 2 (mains running, CRR made)", got)
	}
	delete(a.pods, "r")
	a.catchUp()
	if after, err := syncPod(t, rec, "r"); err != nil || after != 0 {
		t.Fatalf("sync of a deleted pod: %s, %v", after, err)
	}
	if got := testutil.ToFloat64(m.PodsTracked); got != 1 {
		t.Errorf("tracked %v after a pod went, want 1", got)
	}
	a.pods["p"].Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
	a.catchUp()
	mustSync(t, rec, "p")
	if got := testutil.ToFloat64(m.PodsTracked); got != 0 {
		t.Errorf("tracked %v after the last pod was done, want 0", got)
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
