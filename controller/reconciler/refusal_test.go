package reconciler_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	"github.com/sidecar-terminator/sidecar-terminator/controller/kruisetest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

const quickExit = "ghcr.io/sidecar-terminator/quick-exit:v1"

// world is a Reader over a fixed pod and node, and a Writer whose answers
// the test scripts per method; it records every write it was sent.
type world struct {
	pod        *corev1.Pod
	nodeLabels map[string]string
	crrs       []*kruisev1alpha1.ContainerRecreateRequest
	crrAPI     bool
	rediscover int

	answers map[string][]error // per method, consumed in order; nil: accepted
	sent    []string
	patches []string // the image patches sent, in order
}

func (w *world) Pod(namespace, name string) (*corev1.Pod, error) {
	if w.pod == nil || w.pod.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	return w.pod, nil
}
func (w *world) Node(string) (decision.NodeFacts, bool) {
	return decision.NodeFacts{Labels: w.nodeLabels}, true
}
func (w *world) CRRs(*corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	return w.crrs, nil
}
func (w *world) CRRAPIAvailable() bool { return w.crrAPI }
func (w *world) RediscoverCRRAPI()     { w.rediscover++ }

// KruiseDaemon: the world has no NodeImages, so nothing is known of the
// daemons (daemonWorld's nodes run one).
func (w *world) KruiseDaemon(string, time.Time, time.Duration) (decision.DaemonState, string) {
	return decision.DaemonUnknown, ""
}

// KruiseTerminatorCRR: OpenKruise's own SidecarTerminator acts on no pod here.
func (w *world) KruiseTerminatorCRR(context.Context, *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return nil, nil
}

// LivePod, LiveCRR and LiveJob read the world as the API server holds it:
// the pod and CRRs it shows (it has no cache apart), and no Job.
func (w *world) LivePod(_ context.Context, _, name string) (*corev1.Pod, error) {
	return w.Pod("", name)
}
func (w *world) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	for _, c := range w.crrs {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), name)
}
func (w *world) LiveJob(_ context.Context, _, name string) (*batchv1.Job, error) {
	return nil, apierrors.NewNotFound(batchv1.Resource("jobs"), name)
}

func (w *world) answer(method string) error {
	w.sent = append(w.sent, method)
	list := w.answers[method]
	if len(list) == 0 {
		return nil
	}
	w.answers[method] = list[1:]
	return list[0]
}

func (w *world) CreateCRR(_ context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, _ bool) error {
	return w.answer("crr " + crr.Name)
}
func (w *world) DeleteCRR(_ context.Context, _, name string) error {
	return w.answer("delete " + name)
}
func (w *world) PatchPod(_ context.Context, _, _ string, patch []byte) error {
	w.patches = append(w.patches, string(patch))
	if strings.Contains(string(patch), "sidecar-terminator.io~1crr-attempts") || strings.Contains(string(patch), `"`+decision.AnnotationCRRAttempts+`"`) {
		// The attempt record: a compare-and-swap of one annotation.
		return w.answer("annotate " + decision.AnnotationCRRAttempts)
	}
	if strings.Contains(string(patch), "sidecar-terminator.io~1crr-api-gone-at") || strings.Contains(string(patch), `"`+decision.AnnotationCRRAPIGone+`"`) {
		return w.answer("annotate " + decision.AnnotationCRRAPIGone)
	}
	return w.answer("swap")
}
func (w *world) PatchPodStatus(context.Context, string, string, []byte) error {
	return w.answer("settle")
}
func (w *world) AnnotatePod(_ context.Context, _, _ string, _ types.UID, key, _ string) error {
	return w.answer("annotate " + key)
}

type event struct{ kind, reason, message string }
type events struct{ list []event }

func (e *events) Event(_ runtime.Object, kind, reason, message string) {
	e.list = append(e.list, event{kind, reason, message})
}
func (e *events) warnings(reason string) []event {
	var out []event
	for _, ev := range e.list {
		if ev.kind == corev1.EventTypeWarning && ev.reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

type fixture struct {
	w       *world
	ev      *events
	clock   *clocktesting.FakeClock
	metrics *reconciler.Metrics
	rec     *reconciler.Reconciler
}

func newFixture(pod *corev1.Pod) *fixture {
	f := &fixture{w: &world{pod: pod, crrAPI: true, answers: map[string][]error{}}, ev: &events{},
		clock: clocktesting.NewFakeClock(podtest.Epoch.Add(11 * time.Second)), metrics: reconciler.NewMetrics(nil)}
	f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, f.w, f.w, f.ev, f.metrics, f.clock)
	return f
}

// newFixtureLive is newFixture over w, reading live through live (w
// wrapped with an API server whose answers the test sets).
func newFixtureLive(w *world, live reconciler.LiveReader) *fixture {
	f := newFixture(w.pod)
	f.w = w
	f.rec = reconciler.New(reconciler.DefaultConfig(), w, w, live, f.ev, f.metrics, f.clock)
	return f
}

// stageTwoRefused runs the first sync of a shipperPod whose stage 1 CRR the
// cache shows, once that CRR's stop window has closed (1m40s after the
// main's exit) with the shipper still running: stage 1's CRR is deleted and
// stage 2's create is refused (500). It returns both CRRs' names.
func stageTwoRefused(t *testing.T, f *fixture) (st1, st2 string) {
	t.Helper()
	st1, st2 = decision.StageCRRName(f.w.pod, 1, 1), decision.StageCRRName(f.w.pod, 2, 1)
	f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{stageCRR(st1, 1, "fluent-bit")}
	f.w.answers["crr "+st2] = []error{apierrors.NewInternalError(context.DeadlineExceeded)}
	f.clock.SetTime(podtest.Epoch.Add(10*time.Second + decision.StopWindow(f.w.pod, decision.DefaultPolicy())))
	f.sync(t)
	if got, want := strings.Join(f.w.sent, ","), "delete "+st1+",crr "+st2; got != want {
		t.Fatalf("first sync: writes %s, want %s", got, want)
	}
	return st1, st2
}

func (f *fixture) sync(t *testing.T) time.Duration {
	t.Helper()
	after, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: f.w.pod.Namespace, Name: f.w.pod.Name})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return after
}

func jobPod(sidecar ...podtest.Option) *corev1.Pod {
	return podtest.Pod("p").Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", sidecar...).Build()
}

var (
	markCRR   = podtest.Env(decision.EnvTerminate, "true")
	markImage = podtest.Env(decision.EnvTerminateWithImage, quickExit)
)

// Issue item 1: kruise-manager down (its webhook, failurePolicy Fail, answers
// 500): the refused CRR is a failed kill, and a sidecar with an image is
// swapped in the same sync, with a Warning naming the status and the answer.
func TestRefusedCRRFallsBackToTheImageSwap(t *testing.T) {
	f := newFixture(jobPod(markCRR, markImage))
	crr := "crr " + decision.CRRName(f.w.pod, 1)
	f.w.answers[crr] = []error{kruisetest.WebhookDown()}
	f.sync(t)
	if want := []string{crr, "swap"}; strings.Join(f.w.sent, ",") != strings.Join(want, ",") {
		t.Fatalf("writes %v, want %v", f.w.sent, want)
	}
	warned := f.ev.warnings(decision.ReasonSidecarKillFailed)
	if len(warned) != 1 || !strings.Contains(warned[0].message, "HTTP 500") || !strings.Contains(warned[0].message, kruisetest.WebhookName) {
		t.Fatalf("want one SidecarKillFailed naming HTTP 500 and the webhook, got %+v", f.ev.list)
	}
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionCreateCRR), reconciler.ResultError)); got != 1 {
		t.Errorf("CRR actions with result error = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.metrics.Refusals.WithLabelValues(string(decision.ActionCreateCRR), "transient")); got != 1 {
		t.Errorf("transient CRR refusals = %v, want 1", got)
	}
}

// Issue item 1: with no image, the refused CRR is sent again on the
// decision's backoff, not the workqueue's (five syncs were five creates), and
// after MaxRefusals a final Warning ends it.
func TestRefusedCRRWithoutImageBacksOffThenGivesUp(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	crr := "crr " + decision.CRRName(f.w.pod, 1)
	p := decision.DefaultPolicy()
	for i := 0; i < p.MaxRefusals; i++ {
		f.w.answers[crr] = append(f.w.answers[crr], kruisetest.WebhookDown())
	}
	after := f.sync(t)
	if len(f.w.sent) != 1 || after != p.RetryBackoff {
		t.Fatalf("first sync: writes %v, requeue %s; want one create and a requeue after %s", f.w.sent, after, p.RetryBackoff)
	}
	// Syncs within the backoff (events waking the pod) send nothing.
	for i := 0; i < 5; i++ {
		f.sync(t)
	}
	if len(f.w.sent) != 1 {
		t.Fatalf("syncs within the backoff wrote %v", f.w.sent)
	}
	for len(f.w.sent) < p.MaxRefusals {
		f.clock.Step(after)
		after = f.sync(t)
		if len(f.w.sent) < p.MaxRefusals && (after <= 0 || after > p.RefusalBackoffMax) {
			t.Fatalf("after %d refusals: requeue %s, want within (0, %s]", len(f.w.sent), after, p.RefusalBackoffMax)
		}
	}
	if after != 0 {
		t.Errorf("after giving up: requeue %s, want none", after)
	}
	f.clock.Step(time.Hour)
	f.sync(t)
	if len(f.w.sent) != p.MaxRefusals {
		t.Fatalf("writes after giving up: %d, want %d", len(f.w.sent), p.MaxRefusals)
	}
	if len(f.ev.warnings(decision.ReasonSidecarKillGaveUp)) != 1 || len(f.ev.warnings(decision.ReasonSidecarKillFailed)) != 1 {
		t.Fatalf("want one SidecarKillFailed and one SidecarKillGaveUp, got %+v", f.ev.list)
	}
}

// Issue 17 item 3: an image patch refused by an admission policy (422 that
// is not our test op) is a Warning, counted as an error and not as stale,
// asked once more after the short backoff (one answer is not proof: see
// decision's permanentRefusalTries), once more after the long one, and then
// given up: three sends in all, never a storm.
func TestRefusedSwapIsPermanent(t *testing.T) {
	f := newFixture(jobPod(markImage))
	policy := apierrors.NewGenericServerResponse(422, "patch", schema.GroupResource{Resource: "pods"}, "p",
		"ValidatingAdmissionPolicy 'images' with binding 'images' denied request: image not allowed", 0, false)
	f.w.answers["swap"] = []error{policy, policy, policy}
	p := decision.DefaultPolicy()
	for i, wait := range []time.Duration{p.RetryBackoff, p.RefusalBackoffMax} {
		after := f.sync(t)
		if after != wait {
			t.Errorf("requeue after permanent refusal %d = %s, want %s", i+1, after, wait)
		}
		for range 4 {
			f.clock.Step(wait / 5)
			f.sync(t)
		}
		if len(f.w.sent) != i+1 {
			t.Fatalf("a permanently refused swap was sent %d times within backoff %d", len(f.w.sent), i+1)
		}
		f.clock.Step(wait / 5)
	}
	f.sync(t)
	f.clock.Step(time.Hour)
	f.sync(t)
	if len(f.w.sent) != 3 {
		t.Fatalf("want a retry after the short backoff and one after the long one, then nothing; sent %v", f.w.sent)
	}
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionSwapImage), reconciler.ResultError)); got != 3 {
		t.Errorf("swap actions with result error = %v, want 3", got)
	}
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionSwapImage), reconciler.ResultStale)); got != 0 {
		t.Errorf("swap actions with result stale = %v, want 0", got)
	}
	if len(f.ev.warnings(decision.ReasonSidecarKillFailed)) != 1 || len(f.ev.warnings(decision.ReasonNoTerminationPath)) != 1 {
		t.Errorf("want one SidecarKillFailed, then one NoTerminationPath, got %+v", f.ev.list)
	}
}

// Our own test op failing is the pod moving on, not a refusal: the sync
// fails (the queue retries on fresh state) and nothing is remembered.
func TestOwnTestOpFailureIsStale(t *testing.T) {
	f := newFixture(jobPod(markImage))
	// The API server's answer to a JSON patch whose test op fails.
	f.w.answers["swap"] = []error{apierrors.NewGenericServerResponse(422, "", schema.GroupResource{}, "", "testing value /spec/containers/1/image failed: test failed", 0, false)}
	if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "p"}); err == nil {
		t.Fatal("a failed test op did not fail the sync")
	}
	f.sync(t)
	if len(f.w.sent) != 2 {
		t.Fatalf("the swap was not sent again at once: %v", f.w.sent)
	}
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionSwapImage), reconciler.ResultStale)); got != 1 {
		t.Errorf("stale = %v, want 1", got)
	}
}

// A CRR create answering 404 (the CRD removed while we run) asks the Reader
// to look for the API again.
func TestCRRNotFoundRediscoversTheAPI(t *testing.T) {
	f := newFixture(jobPod(markCRR, markImage))
	f.w.answers["crr "+decision.CRRName(f.w.pod, 1)] = []error{kruisetest.CRDGone()}
	f.sync(t)
	if f.w.rediscover != 1 {
		t.Fatalf("rediscoveries = %d, want 1", f.w.rediscover)
	}
	if w := f.ev.warnings(decision.ReasonSidecarKillFailed); len(w) != 1 || !strings.Contains(w[0].message, "HTTP 404") {
		t.Fatalf("want a SidecarKillFailed naming HTTP 404, got %+v", f.ev.list)
	}
	if f.w.sent[len(f.w.sent)-1] != "swap" {
		t.Fatalf("want the swap after the 404, got %v", f.w.sent)
	}
}

// Issue item 3: kruise deleted the pod's CRRs (ttlSecondsAfterFinished) after
// three attempts; the pod's annotation keeps the count, so no fourth CRR.
func TestAttemptsSurviveDeletedCRRs(t *testing.T) {
	pod := jobPod(markCRR)
	pod.Annotations = map[string]string{decision.AnnotationCRRAttempts: "3"}
	f := newFixture(pod)
	f.sync(t)
	if len(f.w.sent) != 0 {
		t.Fatalf("attempts used up, CRRs deleted: wrote %v", f.w.sent)
	}
	if len(f.ev.warnings(decision.ReasonSidecarKillGaveUp)) != 1 {
		t.Fatalf("want a SidecarKillGaveUp warning, got %+v", f.ev.list)
	}
}

// A retry records its attempt on the pod once its CRR is made (a refused
// create claims no attempt); the first attempt writes nothing more (one
// write per pod on the happy path).
func TestRetryRecordsItsAttemptFirstAttemptDoesNot(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	f.sync(t)
	if want := "crr " + decision.CRRName(f.w.pod, 1); strings.Join(f.w.sent, ",") != want {
		t.Fatalf("first attempt wrote %v, want only %s", f.w.sent, want)
	}
	pod := jobPod(markCRR)
	pod.Annotations = map[string]string{decision.AnnotationCRRAttempts: "1"} // as after a restart, CRR 1 deleted
	g := newFixture(pod)
	g.sync(t)
	want := []string{"crr " + decision.CRRName(pod, 2), "annotate " + decision.AnnotationCRRAttempts}
	if strings.Join(g.w.sent, ",") != strings.Join(want, ",") {
		t.Fatalf("retry wrote %v, want %v", g.w.sent, want)
	}
}

// Issue item 6: a write whose effect never reaches the cache (a policy engine
// stripped the CRR's label) is revisited at the expectation's timeout even if
// nothing wakes the pod, and the timeout is counted. The CRR it made is
// remembered: not made again while it may be in flight.
func TestUnseenWriteIsRevisitedAtTheExpectationTimeout(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	after := f.sync(t)
	timeout := reconciler.DefaultConfig().ExpectationTimeout
	if after != timeout {
		t.Fatalf("requeue after an action = %s, want the expectation timeout %s", after, timeout)
	}
	f.clock.Step(timeout)
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.ExpectationsTimedOut); got != 1 {
		t.Fatalf("expectations timed out = %v, want 1", got)
	}
	if len(f.w.sent) != 1 {
		t.Fatalf("the remembered CRR was made again after the timeout: %v", f.w.sent)
	}
}

// Issue item 2: the quick-exit image does not pull; the sync keeps the pod
// queued, and once the pod's grace period and the start allowance pass, a
// Warning names the kubelet's waiting reason.
func TestSwappedSidecarThatNeverStartsIsFollowedThrough(t *testing.T) {
	pod := jobPod(markImage, podtest.Waiting("ErrImagePull", nil))
	pod.Spec.Containers[1].Image = quickExit
	f := newFixture(pod)
	bound := 30*time.Second + decision.DefaultPolicy().SwapStartAllowance
	// First seen swapped: the bound counts from the mains' exit, a second
	// ago, the earliest the swap can have been made.
	if after := f.sync(t); after != bound-time.Second {
		t.Fatalf("requeue = %s, want the bound %s less the second since the mains exited", after, bound)
	}
	// A controller restart (no memory of the swap) does not move the bound.
	f.clock.Step(bound - time.Second)
	f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, f.w, f.w, f.ev, f.metrics, f.clock)
	if after := f.sync(t); after <= 0 {
		t.Fatalf("no requeue past the bound")
	}
	w := f.ev.warnings(decision.ReasonQuickExitNotRunning)
	if len(w) != 1 || !strings.Contains(w[0].message, "ErrImagePull") {
		t.Fatalf("want one %s naming ErrImagePull, got %+v", decision.ReasonQuickExitNotRunning, f.ev.list)
	}
	if len(f.w.sent) != 0 {
		t.Fatalf("wrote %v", f.w.sent)
	}
}

// kruise's webhook answers 400 from its own pod cache, which can lag ours
// ("no containerID ... maybe the container has not been initialized" for a
// sidecar that started as the main exited): the create is tried again after
// the short backoff, and succeeds, not after the permanent refusals' wait.
func TestCRRWebhookBadRequestIsRetriedSoon(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	crr := "crr " + decision.CRRName(f.w.pod, 1)
	p := decision.DefaultPolicy()
	f.w.answers[crr] = []error{kruisetest.Denied(http.StatusBadRequest,
		"no containerID in proxy containerStatus, maybe the container has not been initialized")}
	after := f.sync(t)
	if len(f.w.sent) != 1 || after != p.RetryBackoff {
		t.Fatalf("first sync: writes %v, requeue %s; want one create and a requeue after %s", f.w.sent, after, p.RetryBackoff)
	}
	f.clock.Step(after)
	f.sync(t)
	if len(f.w.sent) != 2 || f.w.sent[1] != crr {
		t.Fatalf("after the backoff: writes %v, want the same CRR again", f.w.sent)
	}
}

// Found by `make chaos` (apiserver-restart, 1 pod of 1,000 left running): a
// kube-apiserver that has just restarted refuses connections, then answers
// 403 for a moment, until its RBAC authorizer's caches have synced. The 403
// after a broken connection was the CRR's second refusal in a row, and a
// permanent refusal gave up at two in all, so the pod got SidecarKillGaveUp
// and was left running. Transient refusals do not count towards a permanent
// refusal's tries, and the first permanent refusal is asked again after the
// short backoff: the create goes through.
func TestForbiddenJustAfterAnAPIServerRestartIsAskedAgain(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	crr := "crr " + decision.CRRName(f.w.pod, 1)
	refused := errors.New(`Post "https://127.0.0.1:6443/apis/apps.kruise.io/v1alpha1/namespaces/default/containerrecreaterequests": dial tcp 127.0.0.1:6443: connect: connection refused`)
	rbacNotSynced := apierrors.NewForbidden(schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}, "",
		errors.New(`User "system:serviceaccount:sidecar-terminator-system:sidecar-terminator" cannot create resource "containerrecreaterequests"`))
	f.w.answers[crr] = []error{refused, rbacNotSynced}
	for i := 0; i < 4; i++ {
		after := f.sync(t)
		if len(f.w.sent) == 3 {
			break
		}
		if after <= 0 || after > decision.DefaultPolicy().RetryBackoff*2 {
			t.Fatalf("sync %d: requeue %s, want a short backoff (sent %v, events %+v)", i+1, after, f.w.sent, f.ev.list)
		}
		f.clock.Step(after)
	}
	if len(f.w.sent) != 3 || f.w.sent[2] != crr {
		t.Fatalf("sent %v, want the create three times: refused, forbidden, accepted", f.w.sent)
	}
	if gaveUp := f.ev.warnings(decision.ReasonSidecarKillGaveUp); len(gaveUp) != 0 {
		t.Errorf("gave up on a 403 seen once: %+v", gaveUp)
	}
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionCreateCRR), reconciler.ResultSuccess)); got != 1 {
		t.Errorf("successful creates = %v, want 1", got)
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

func newFixtureWith(pod *corev1.Pod, cfg reconciler.Config) *fixture {
	f := newFixture(pod)
	f.rec = reconciler.New(cfg, f.w, f.w, f.w, f.ev, f.metrics, f.clock)
	return f
}

func (f *fixture) creates() int {
	n := 0
	for _, s := range f.w.sent {
		if strings.HasPrefix(s, "crr ") {
			n++
		}
	}
	return n
}

// With --crr-retry-backoff=0 a refused CRR may be sent again at once, so
// the refusals no longer end a sync's passes by themselves: the passes are
// capped (the first, and one per kind of write whose refusal is remembered:
// CRR, swap, settle, delete, the attempt record, the record of the CRR API's
// loss, so seven), the pod is looked at again soon, not
// never, and the refusals still end in a give-up Warning.
func TestRefusalPassesAreCappedPerSync(t *testing.T) {
	cfg := reconciler.DefaultConfig()
	cfg.Policy.RetryBackoff = 0
	f := newFixtureWith(jobPod(markCRR), cfg)
	crr := "crr " + decision.CRRName(f.w.pod, 1)
	for i := 0; i < 100; i++ {
		f.w.answers[crr] = append(f.w.answers[crr], kruisetest.WebhookDown())
	}
	after := f.sync(t)
	if got := f.creates(); got != 7 {
		t.Fatalf("one sync sent %d refused creates, want 7 (the first pass and one per refusal kind)", got)
	}
	if after <= 0 {
		t.Fatalf("after the capped passes: requeue %s, want a later look (a zero backoff must not mean never)", after)
	}
	for i := 0; i < 10 && after > 0; i++ {
		f.clock.Step(after)
		after = f.sync(t)
	}
	max := cfg.Policy.MaxRefusals
	if got := f.creates(); got != max || after != 0 {
		t.Fatalf("creates %d, last requeue %s; want %d (MaxRefusals) and none", got, after, max)
	}
	if len(f.ev.warnings(decision.ReasonSidecarKillGaveUp)) != 1 {
		t.Fatalf("want one SidecarKillGaveUp, got %+v", f.ev.list)
	}
}

// slowWorld answers CRR creates after the clock moved on: an API server
// under load.
type slowWorld struct {
	*world
	clock *clocktesting.FakeClock
	delay time.Duration
}

func (s slowWorld) CreateCRR(ctx context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, readPodFirst bool) error {
	s.clock.Step(s.delay)
	return s.world.CreateCRR(ctx, crr, readPodFirst)
}
