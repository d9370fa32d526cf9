package reconciler_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The stop window: a stop is in flight from its send until its deadline plus
// the pod's grace period plus a margin, and no second stop of the same
// sidecar starts inside it, whoever leads. These tests follow one pod through
// kruise's and another replica's doings on apiFake, and check the window by
// what a new leader, whose memory is empty, does.

// windowAPI is apiFake with its live reads of pods and CRRs counted.
type windowAPI struct {
	*apiFake
	reads []string
}

func (l *windowAPI) LivePod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	l.reads = append(l.reads, "pod "+name)
	return l.apiFake.LivePod(ctx, namespace, name)
}

func (l *windowAPI) LiveCRR(ctx context.Context, namespace, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	l.reads = append(l.reads, "crr "+name)
	return l.apiFake.LiveCRR(ctx, namespace, name)
}

// newLeader is a replica that has just taken the lead: its memory is empty,
// its cache shows the truth.
func (l *windowAPI) newLeader(cfg reconciler.Config) *reconciler.Reconciler {
	l.catchUp()
	return reconciler.New(cfg, l.apiFake, l, l, l.apiFake, nil, l.clock)
}

// longGracePod is a Job's pod whose main exited at 10 s and whose sidecar,
// stopped by CRR, drains for five minutes.
func longGracePod() *corev1.Pod {
	pod := podtest.Pod("p").OwnedByJob("j").Node("normal").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("log", markCRR, podtest.Running()).Build()
	grace := int64(300)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	return pod
}

// kruiseDaemonTakesUp is kruise-daemon taking the CRR up: Recreating, its
// targets' stops begun (Pending, not yet killed).
func (l *windowAPI) kruiseDaemonTakesUp(name string) {
	for _, c := range l.crrs {
		if c.Name == name {
			c.Status.Phase = kruisev1alpha1.ContainerRecreateRequestRecreating
			for _, t := range c.Spec.Containers {
				c.Status.ContainerRecreateStates = append(c.Status.ContainerRecreateStates,
					kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{Name: t.Name, Phase: kruisev1alpha1.ContainerRecreateRequestPending})
			}
		}
	}
}

// kruiseManagerSyncs is kruise-manager at now: a CRR past its deadline is
// completed (Failed), and a finished one past its ttlSecondsAfterFinished is
// deleted, as kruise does it from the CRR's own fields.
func (l *windowAPI) kruiseManagerSyncs() {
	now := l.clock.Now()
	var kept []*kruisev1alpha1.ContainerRecreateRequest
	for _, c := range l.crrs {
		if c.Status.CompletionTime == nil && c.Spec.ActiveDeadlineSeconds != nil &&
			!now.Before(c.CreationTimestamp.Add(time.Duration(*c.Spec.ActiveDeadlineSeconds)*time.Second)) {
			c.Status.Phase = kruisev1alpha1.ContainerRecreateRequestFailed
			c.Status.Message = "exceeded activeDeadlineSeconds"
			at := metav1.NewTime(c.CreationTimestamp.Add(time.Duration(*c.Spec.ActiveDeadlineSeconds) * time.Second))
			c.Status.CompletionTime = &at
		}
		if c.Status.CompletionTime != nil && c.Spec.TTLSecondsAfterFinished != nil &&
			!now.Before(c.Status.CompletionTime.Add(time.Duration(*c.Spec.TTLSecondsAfterFinished)*time.Second)) {
			continue
		}
		kept = append(kept, c)
	}
	l.crrs = kept
}

func newWindowAPI(t *testing.T, pod *corev1.Pod) *windowAPI {
	a, _, _ := newAPI(t, pod)
	return &windowAPI{apiFake: a}
}

// creates lists the CRR creates among the writes since mark.
func (l *windowAPI) createsSince(mark int) int {
	n := 0
	for _, w := range l.writes[mark:] {
		if w == "crr" {
			n++
		}
	}
	return n
}

// recordedAttempt is the attempt the pod's record names, whatever the
// format's time part: "<attempt>" or "<stage>:<attempt>", then anything
// after a space.
func recordedAttempt(pod *corev1.Pod) int {
	v, _, _ := strings.Cut(pod.Annotations[decision.AnnotationCRRAttempts], " ")
	if _, n, ok := strings.Cut(v, ":"); ok {
		v = n
	}
	n, _ := strconv.Atoi(v)
	return n
}

// A CRR's evidence of a stop lasts as long as the stop may: with the
// operator's TTL shorter than the pod's grace period, kruise-daemon picks
// the CRR up late, kruise-manager fails it at its deadline with the sidecar
// still draining, and a new leader looks after the operator's TTL has
// passed. The CRR is still there, and the new leader waits for the stop.
func TestACRROutlivesItsStopWindowWhateverTheTTLFlag(t *testing.T) {
	pod := longGracePod()
	l := newWindowAPI(t, pod)
	cfg := reconciler.DefaultConfig()
	cfg.CRRTTLAfterFinished = 10 * time.Second
	a := l.newLeader(cfg)
	mustSync(t, a, "p")
	if len(l.crrs) != 1 {
		t.Fatalf("writes %v, want the first CRR", l.writes)
	}
	crr := l.crrs[0]
	deadline := decision.CRRDeadline(pod, cfg.Policy)
	window := deadline + decision.PodGrace(pod)
	if ttl := time.Duration(*crr.Spec.TTLSecondsAfterFinished) * time.Second; ttl < window {
		t.Errorf("ttlSecondsAfterFinished %s, want at least deadline %s + grace %s", ttl, deadline, decision.PodGrace(pod))
	}
	made := crr.CreationTimestamp.Time
	l.clock.SetTime(made.Add(50 * time.Second))
	l.kruiseDaemonTakesUp(crr.Name)
	l.clock.SetTime(made.Add(deadline + 20*time.Second))
	l.kruiseManagerSyncs()
	mark := len(l.writes)
	b := l.newLeader(cfg)
	mustSync(t, b, "p")
	if n := l.createsSince(mark); n != 0 {
		t.Fatalf("the new leader made %d CRRs %s after the first, whose stop kruise-daemon began at %s with a grace period of %s: a second stop inside the window (writes %v)",
			n, deadline+20*time.Second, 50*time.Second, decision.PodGrace(pod), l.writes[mark:])
	}
}

// failFirstAttempt runs leader a through a first attempt that kruise-daemon
// never takes up: made at 11 s, failed at its deadline; a sees the failure
// one second later and waits the retry's backoff.
func failFirstAttempt(t *testing.T, l *windowAPI, a *reconciler.Reconciler) (failedAt time.Time) {
	t.Helper()
	pod := l.pods["p"]
	mustSync(t, a, "p")
	failedAt = podtest.Epoch.Add(11*time.Second + decision.CRRDeadline(pod, decision.DefaultPolicy()))
	l.clock.SetTime(failedAt)
	l.kruiseManagerSyncs()
	l.catchUp()
	l.clock.SetTime(failedAt.Add(time.Second))
	mustSync(t, a, "p")
	l.catchUp()
	return failedAt
}

// A retry's record names when the attempt began, so a new leader that finds
// the record and no CRR (a third party deleted them) counts the attempt's
// window from it: kruise-daemon took attempt 2 up and its stop drains for the
// grace period, and the new leader makes no attempt 3 inside it.
func TestARecordedAttemptKeepsItsWindowWhenItsCRRIsGone(t *testing.T) {
	pod := longGracePod()
	l := newWindowAPI(t, pod)
	a := l.newLeader(reconciler.DefaultConfig())
	failedAt := failFirstAttempt(t, l, a)
	l.clock.SetTime(failedAt.Add(decision.DefaultPolicy().RetryBackoff + time.Second))
	mustSync(t, a, "p")
	second := decision.CRRName(pod, 2)
	l.catchUp()
	if got := l.crrs[len(l.crrs)-1].Name; got != second {
		t.Fatalf("writes %v, want attempt 2 (%s) made", l.writes, second)
	}
	l.clock.Step(10 * time.Second)
	l.kruiseDaemonTakesUp(second)
	// Someone deletes the pod's CRRs while the stop drains.
	l.clock.Step(30 * time.Second)
	l.crrs = nil
	mark := len(l.writes)
	b := l.newLeader(reconciler.DefaultConfig())
	mustSync(t, b, "p")
	if n := l.createsSince(mark); n != 0 {
		t.Fatalf("the new leader made %d CRRs 40 s after attempt 2, whose stop drains for %s: the record counted no window (record %q, writes %v)",
			n, decision.PodGrace(pod), l.pods["p"].Annotations[decision.AnnotationCRRAttempts], l.writes[mark:])
	}
}

// A retry whose create is refused claims no attempt: the record is written
// only after a create succeeded, so the refused attempt keeps its number and
// waits the refusal's backoff, rather than being counted made and followed
// at once by the next.
func TestARefusedRetryClaimsNoAttempt(t *testing.T) {
	pod := longGracePod()
	l := newWindowAPI(t, pod)
	a := l.newLeader(reconciler.DefaultConfig())
	failedAt := failFirstAttempt(t, l, a)
	l.clock.SetTime(failedAt.Add(decision.DefaultPolicy().RetryBackoff + time.Second))
	l.fail["crr"] = apierrors.NewInternalError(errors.New("webhook down"))
	mustSync(t, a, "p")
	if n := recordedAttempt(l.pods["p"]); n > 1 {
		t.Errorf("after attempt 2's create was refused the pod records attempt %d (%q), want at most 1",
			n, l.pods["p"].Annotations[decision.AnnotationCRRAttempts])
	}
	l.catchUp()
	l.clock.Step(time.Second)
	mark := len(l.writes)
	mustSync(t, a, "p")
	if n := l.createsSince(mark); n != 0 {
		t.Fatalf("a second after the refused create: %d creates (%v, CRRs %v), want none inside the refusal's backoff", n, l.writes[mark:], crrNames(l.crrs))
	}
	l.clock.Step(time.Minute)
	mustSync(t, a, "p")
	l.catchUp()
	if got, want := crrNames(l.crrs), decision.CRRName(pod, 1)+","+decision.CRRName(pod, 2); got != want {
		t.Errorf("after the backoff the CRRs are %s, want %s: the refused attempt keeps its number", got, want)
	}
}

func crrNames(crrs []*kruisev1alpha1.ContainerRecreateRequest) string {
	var out []string
	for _, c := range crrs {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

// The attempt record is a compare-and-swap on the value read: a replica
// whose view is older than the record (its write queued behind its client's
// rate limit, or its clock behind) does not move the count back.
func TestAStaleViewDoesNotMoveTheAttemptRecordBack(t *testing.T) {
	pod := longGracePod()
	l := newWindowAPI(t, pod)
	failedAt := podtest.Epoch.Add(11*time.Second + decision.CRRDeadline(pod, decision.DefaultPolicy()))
	// Replica b's view: attempt 1 failed a moment ago, nothing recorded.
	a := l.newLeader(reconciler.DefaultConfig())
	mustSync(t, a, "p")
	l.clock.SetTime(failedAt)
	l.kruiseManagerSyncs()
	l.catchUp()
	stalePods, staleCRRs := l.cachedPods, l.cachedCRRs
	// Replica a goes on: it records attempt 1, then makes attempt 2.
	l.clock.SetTime(failedAt.Add(time.Second))
	mustSync(t, a, "p")
	l.catchUp()
	l.clock.SetTime(failedAt.Add(decision.DefaultPolicy().RetryBackoff + time.Second))
	mustSync(t, a, "p")
	l.catchUp()
	if n := recordedAttempt(l.pods["p"]); n != 2 {
		t.Fatalf("replica a's record %q, want attempt 2", l.pods["p"].Annotations[decision.AnnotationCRRAttempts])
	}
	b := reconciler.New(reconciler.DefaultConfig(), l.apiFake, l, l, l.apiFake, nil, l.clock)
	l.cachedPods, l.cachedCRRs = stalePods, staleCRRs
	l.clock.SetTime(failedAt.Add(2 * time.Second))
	_, _ = syncPod(t, b, "p")
	if n := recordedAttempt(l.pods["p"]); n != 2 {
		t.Fatalf("after replica b's write on its older view the record is %q (attempt %d), want attempt 2 kept", l.pods["p"].Annotations[decision.AnnotationCRRAttempts], n)
	}
}

// The stop-stage mark is a compare-and-swap too: a swap decided on a view
// without the mark does not overwrite the mark another replica wrote since.
func TestAStaleViewDoesNotMoveTheStopStageMarkBack(t *testing.T) {
	pod := podtest.Pod("p").Node("vk").Annotate(decision.AnnotationStopOrder, "a,b").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("a", markImage, podtest.Running()).Container("b", markImage, podtest.Running()).Build()
	l := newWindowAPI(t, pod)
	theirs := "2 " + podtest.Epoch.Add(5*time.Second).UTC().Format(time.RFC3339)
	l.pods["p"].Annotations[decision.AnnotationStopStage] = theirs
	b := reconciler.New(reconciler.DefaultConfig(), l.apiFake, l, l, l.apiFake, nil, l.clock)
	_, _ = syncPod(t, b, "p")
	if got := l.pods["p"].Annotations[decision.AnnotationStopStage]; got != theirs {
		t.Fatalf("writes %v: the stop-stage mark is %q, want %q, written by another replica after this one's view", l.writes, got, theirs)
	}
}

// A stage's CRR that kruise-daemon takes up late is not stopped again by the
// next stage's: its stop drains for the grace period from the pickup, not
// from the CRR's creation.
func TestALatePickedUpStageIsNotStoppedAgainByTheNext(t *testing.T) {
	pod := shipperPod(podtest.Running()).Node("normal").Build()
	l := newWindowAPI(t, pod)
	a := l.newLeader(reconciler.DefaultConfig())
	mustSync(t, a, "p")
	st1 := decision.StageCRRName(pod, 1, 1)
	if crrNames(l.crrs) != st1 {
		t.Fatalf("writes %v, want stage 1's CRR", l.writes)
	}
	made := l.crrs[0].CreationTimestamp.Time
	pickup := made.Add(15 * time.Second)
	l.clock.SetTime(pickup)
	l.kruiseDaemonTakesUp(st1)
	l.catchUp()
	// Past the stage bound as counted from the CRR's creation, inside the
	// grace period counted from the pickup.
	for _, at := range []time.Duration{decision.PodGrace(pod) + 11*time.Second, decision.PodGrace(pod) + 14*time.Second} {
		l.clock.SetTime(made.Add(at))
		l.kruiseManagerSyncs()
		l.catchUp()
		for _, r := range []*reconciler.Reconciler{a, l.newLeader(reconciler.DefaultConfig())} {
			mark := len(l.writes)
			mustSync(t, r, "p")
			l.catchUp()
			for _, c := range l.crrs {
				for _, ctr := range c.Spec.Containers {
					if c.Name != st1 && ctr.Name == "fluent-bit" && l.clock.Now().Before(pickup.Add(decision.PodGrace(pod))) {
						t.Fatalf("at %s CRR %s stops fluent-bit again, whose stop began at %s (grace %s): writes %v",
							at, c.Name, pickup.Sub(made), decision.PodGrace(pod), l.writes[mark:])
					}
				}
			}
		}
	}
}

// An ordered pod's happy path writes each stage's CRR and the deletes that
// let kruise-daemon take up the next, and reads nothing live: a controller
// that watched the pod since before its main exited has seen every CRR of
// its stop, in the cache or as its own write, so no plan of it names a CRR
// to confirm (decision/confirm.go). A controller that took over mid-stop
// reads the next stage's CRR before each stage's (soak seed 313; the
// leader-move tests).
func TestAnOrderedPodsHappyPathReadsNoCRRLive(t *testing.T) {
	pod := podtest.Pod("p").OwnedByJob("j").Node("normal").Annotate(decision.AnnotationStopOrder, "a,b,c").
		Container("main", podtest.Running()).
		Container("a", markCRR, podtest.Running()).Container("b", markCRR, podtest.Running()).Container("c", markCRR, podtest.Running()).Build()
	l := newWindowAPI(t, pod)
	r := l.newLeader(reconciler.DefaultConfig())
	mustSync(t, r, "p")
	l.clock.Step(time.Second)
	l.pods["p"].Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.NewTime(l.clock.Now())}}
	l.catchUp()
	l.clock.Step(time.Second)
	for i, name := range []string{"a", "b", "c"} {
		mustSync(t, r, "p")
		l.catchUp()
		if got := len(l.crrs); got != 1 {
			t.Fatalf("stage %d: CRRs %s, want one in flight", i+1, crrNames(l.crrs))
		}
		l.clock.Step(2 * time.Second)
		l.kruiseDaemonTakesUp(l.crrs[0].Name)
		for j, c := range l.pods["p"].Status.ContainerStatuses {
			if c.Name == name {
				l.pods["p"].Status.ContainerStatuses[j].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.NewTime(l.clock.Now())}}
			}
		}
		l.catchUp()
		l.clock.Step(time.Second)
	}
	mustSync(t, r, "p")
	if got, want := strings.Join(l.writes, ","), "crr,delete,crr,delete,crr"; got != want {
		t.Errorf("writes %s, want %s", got, want)
	}
	if len(l.reads) > 0 {
		t.Errorf("live reads %v, want none", l.reads)
	}
}

// A pod's grace period sets its CRRs' TTL, and a hostile one does not wrap
// the field round to a negative TTL: it is held at the field's largest value.
func TestACRRsTTLIsBoundedToItsField(t *testing.T) {
	pod := longGracePod()
	grace := int64(3_000_000_000)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	l := newWindowAPI(t, pod)
	mustSync(t, l.newLeader(reconciler.DefaultConfig()), "p")
	if len(l.crrs) != 1 {
		t.Fatalf("writes %v, want the CRR", l.writes)
	}
	if ttl := *l.crrs[0].Spec.TTLSecondsAfterFinished; ttl != math.MaxInt32 {
		t.Errorf("ttlSecondsAfterFinished %d, want %d", ttl, math.MaxInt32)
	}
}

// A stage's CRR delete that got no answer is checked at the API server (soak
// seed 376: the delete timed out unapplied, and a policy strips our label,
// so the cache does not show the CRR either): it still stands, so the next
// stage's CRR is not made beside it.
func TestAStageDeleteWithoutAnswerIsCheckedBeforeTheNextStage(t *testing.T) {
	running := shipperPod(podtest.Running()).Build()
	st1, st2 := decision.StageCRRName(running, 1, 1), decision.StageCRRName(running, 2, 1)
	w := &liveWorld{world: &world{pod: running, crrAPI: true, answers: map[string][]error{}}, live: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	// Ours as made, but for the managed-by label a policy stripped.
	crr := stageCRR(st1, 1, "fluent-bit")
	crr.Labels[reconciler.LabelPodUID], crr.Spec.PodName = string(running.UID), running.Name
	crr.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: running.Name, UID: running.UID}}
	deadline := int64(decision.CRRDeadline(running, decision.DefaultPolicy()) / time.Second)
	crr.Spec.ActiveDeadlineSeconds = &deadline
	w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{crr}
	w.live[st1] = crr
	f := newFixtureLive(w.world, w)
	f.clock.SetTime(podtest.Epoch.Add(15 * time.Second))
	f.sync(t)
	if len(w.sent) != 0 {
		t.Fatalf("writes %v while stage 1's CRR is in flight, want none", w.sent)
	}
	// The shipper stopped; the cache no longer lists stage 1's CRR.
	w.pod = shipperPod(podtest.Exited(0, podtest.Epoch.Add(16*time.Second))).Build()
	w.crrs = nil
	w.answers["delete "+st1] = []error{apierrors.NewTimeoutError("simulated timeout, not applied", 1)}
	f.clock.SetTime(podtest.Epoch.Add(20 * time.Second))
	f.sync(t)
	for _, s := range w.sent {
		if s == "crr "+st2 {
			t.Fatalf("writes %v: stage 2's CRR made while stage 1's, whose delete got no answer, still stands", w.sent)
		}
	}
}
