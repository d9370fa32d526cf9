package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A sidecar named by the pod's annotation that has its own image env uses
// that image: the pod's quick-exit annotation is not read for it, so an
// over-long one is no Warning about this sidecar.
func TestAnnotatedSidecarsOwnImageWinsOverTheAnnotation(t *testing.T) {
	huge := DefaultQuickExitRepository + ":" + strings.Repeat("a", MaxValueLen)
	pod := podtest.Pod("p").Annotate(AnnotationSidecars, "log").Annotate(AnnotationQuickExitImage, huge).
		Container("main", exited(0)).Container("log", markImage).Build()
	ctrs, problems := Classify(pod, DefaultPolicy())
	for _, p := range problems {
		if p.Reason == ReasonInvalidQuickExitImage {
			t.Errorf("Warning %s: %s", p.Reason, p.Message)
		}
	}
	for _, c := range ctrs {
		if c.Name == "log" && c.QuickExitImage != quickExit {
			t.Errorf("log's quick-exit image %q, want its own %q", c.QuickExitImage, quickExit)
		}
	}
}

// An allowlist entry without a slash (a Docker Hub short name) is a bare
// repository like any other: any tag of it is allowed, another repository
// is not, and a full reference without a slash allows exactly that image.
func TestAllowlistEntryWithoutASlash(t *testing.T) {
	for _, tc := range []struct {
		image, allowed string
		want           bool
	}{
		{"busybox:1.36", "busybox", true},
		{"docker.io/library/busybox:1.36", "busybox", true},
		{"alpine:3", "busybox", false},
		{"busybox:1.36", "busybox:1.36", true},
		{"busybox:1.37", "busybox:1.36", false},
		{"docker.io/library/busybox:1.36", "busybox:1.36", true},
	} {
		if got := ImageAllowed(tc.image, []string{tc.allowed}); got != tc.want {
			t.Errorf("ImageAllowed(%q, [%q]) = %v, want %v", tc.image, tc.allowed, got, tc.want)
		}
	}
}

// Classify reports whether a container's previous instance ended (the
// kubelet's lastState.terminated).
func TestClassifyReportsAnEarlierTermination(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Running()).
		Container("proxy", markCRR, podtest.Running()).Build()
	pod.Status.ContainerStatuses[1].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137}
	ctrs, _ := Classify(pod, DefaultPolicy())
	got := map[string]bool{}
	for _, c := range ctrs {
		got[c.Name] = c.WasTerminated
	}
	if !got["log"] || got["proxy"] {
		t.Errorf("WasTerminated %v, want log only", got)
	}
}

// A CRR that names no container has stopped nothing: explain shows it as
// kruise-daemon's work in progress, not as a kill done.
func TestCRRWithoutContainersHasNotStoppedAnything(t *testing.T) {
	pod := podtest.Pod("p").UID("u").Node("n").Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("log", markCRR, podtest.Running()).Build()
	got := CRRStates(Input{Pod: pod, Now: podtest.Epoch.Add(time.Second), Policy: DefaultPolicy(),
		CRRs: []CRR{{Name: "empty", Attempt: 1, Phase: "Recreating", Created: podtest.Epoch, Deadline: time.Minute}}})
	if len(got) != 1 || !strings.Contains(got[0].Meaning, "kruise-daemon is stopping its containers") {
		t.Errorf("states %+v, want the stop in progress", got)
	}
}

// explain's stop-order lines: "Waiting" only while later stages wait,
// "Held up" only when a stage ran past its bound, naming those sidecars;
// the CRR table does not cut off what follows it (the second terminator).
func TestExplainStopOrderLinesOnlyWhenTheyApply(t *testing.T) {
	stage := func(next, heldUp []string) Plan {
		return Plan{Verdict: VerdictInProgress, Stage: &StageStatus{Order: []string{"a", "b"}, Stage: 2, Last: 2,
			Stopping: []string{"b"}, Next: next, HeldUp: heldUp}}
	}
	for _, tc := range []struct {
		name   string
		plan   Plan
		want   []string
		absent []string
	}{
		{"last stage, nothing held up", stage(nil, nil), nil, []string{"Waiting:", "Held up:"}},
		{"a stage waits, one held up", stage([]string{"c"}, []string{"a"}), []string{"Waiting:  [c] wait for [b]", "Held up:  [a] ran past"}, nil},
		{"second terminator after the CRRs", Plan{Verdict: VerdictInProgress,
			CRRs:             []CRRState{{Name: "p-u-st1", Attempt: 1, Phase: "Pending", Containers: []string{"log=-"}, Meaning: "waits"}},
			SecondTerminator: &SecondTerminator{CRR: "kruise-crr", Containers: []string{"log"}}},
			[]string{"p-u-st1", "Second terminator:", "kruise-crr"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := explain(t, tc.plan)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("%q in:\n%s", a, out)
				}
			}
		})
	}
}

// A pod is restarting all its containers when a container's status says it
// was stopped for that restart; a container the kubelet reports no status
// for yet does not count either way.
func TestRestartingAllContainersFromAContainersStatus(t *testing.T) {
	restarting := podtest.Pod("p").Container("main", podtest.Exited(137, podtest.Epoch)).Container("log", markCRR, podtest.Running()).Build()
	restarting.Status.ContainerStatuses[0].State.Terminated.Reason = RestartingAllContainersReason
	plain := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.NoStatus()).Build()
	if !RestartingAllContainers(restarting) {
		t.Errorf("a main stopped for the restart: not restarting")
	}
	if RestartingAllContainers(plain) {
		t.Errorf("a main exited 0 beside a sidecar without status: restarting")
	}
}

// A refusal names its status for a person: the HTTP code with its reason
// when the server gave one, the code alone when not, "no answer" without
// one.
func TestRefusalDescribe(t *testing.T) {
	for _, tc := range []struct {
		r    Refusal
		want string
	}{
		{Refusal{Code: 403, Reason: "Forbidden", Message: "denied"}, "HTTP 403 Forbidden: denied"},
		{Refusal{Code: 500, Message: "boom"}, "HTTP 500: boom"},
		{Refusal{Message: "timeout"}, "no answer: timeout"},
	} {
		if got := tc.r.Describe(); got != tc.want {
			t.Errorf("Describe() = %q, want %q", got, tc.want)
		}
	}
}

// Stop order "fluent-bit": the sidecars it does not name (istio-proxy) are
// stage 0, fluent-bit stage 1. fluent-bit has stopped; istio-proxy still
// runs.
func orderedProxyRunning() *corev1.Pod {
	return ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Exited(137, exitAt.Add(20*time.Second))).
		Container("istio-proxy", markCRR, podtest.Running()).Build()
}

// Once stage 1 was issued (its CRR exists), a stage-0 sidecar that still
// runs is stopped with the current stage: the order never goes back to
// stage 0, whose CRR would then be made beside stage 1's.
func TestALateStageZeroSidecarDoesNotSendTheOrderBack(t *testing.T) {
	p := Decide(Input{Pod: orderedProxyRunning(), Node: normal, CRRAPI: true, Now: exitAt.Add(30 * time.Second), Policy: DefaultPolicy(),
		CRRs: []CRR{crrOfStage(1, 1, "Recreating", exitAt.Add(10*time.Second), "fluent-bit")}})
	if p.Stage == nil || p.Stage.Stage != 1 {
		t.Fatalf("stage %+v, want stage 1 to stay the current one", p.Stage)
	}
	for _, a := range p.Actions {
		if a.Kind == ActionCreateCRR && a.Stage == 0 {
			t.Errorf("a stage-0 CRR %+v beside stage 1's", a)
		}
	}
}

// The only sidecar still running is of the last stage that was issued: its
// kill follows it through; no later stage waits, so nothing is "held up".
func TestTheLastRunningStageIsNotHeldUp(t *testing.T) {
	p := Decide(Input{Pod: orderedProxyRunning(), Node: normal, CRRAPI: true, Now: exitAt.Add(5 * time.Minute), Policy: DefaultPolicy(),
		CRRs: []CRR{crrOfStage(0, 1, "Recreating", exitAt.Add(time.Second), "istio-proxy")}})
	if p.Stage == nil || p.Stage.Stage != 0 || len(p.Stage.HeldUp) != 0 || !p.Stage.Until.IsZero() {
		t.Fatalf("stage %+v, want stage 0, nothing held up, no bound", p.Stage)
	}
	for _, pr := range p.Problems {
		if pr.Reason == ReasonStopOrderHeldUp {
			t.Errorf("%s: %s", pr.Reason, pr.Message)
		}
	}
}

// The plan's reason names the stop order's wait only while later stages
// wait: not for the last stage.
func TestStopOrderReasonOnlyWhileLaterStagesWait(t *testing.T) {
	first := ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Running()).Container("istio-proxy", markCRR, podtest.Running()).Build()
	p := Decide(Input{Pod: first, Node: normal, CRRAPI: true, Now: exitAt.Add(time.Second), Policy: DefaultPolicy()})
	if !strings.Contains(p.Reason, "stop order: stage 0 of 1, [fluent-bit] wait for [istio-proxy]") {
		t.Errorf("first stage's reason %q, want the wait named", p.Reason)
	}
	last := Decide(Input{Pod: orderedProxyRunning(), Node: normal, CRRAPI: true, Now: exitAt.Add(5 * time.Minute), Policy: DefaultPolicy(),
		CRRs: []CRR{crrOfStage(0, 1, "Recreating", exitAt.Add(time.Second), "istio-proxy")}})
	if strings.Contains(last.Reason, "stop order:") {
		t.Errorf("last stage's reason %q names a wait", last.Reason)
	}
}

// A refused swap of the current stage's sidecar is waited out within a stop
// order as without one: the swap is not sent again before its backoff.
func TestARefusedSwapInAStopOrderWaitsItsBackoff(t *testing.T) {
	pod := ordered("fluent-bit").Container("fluent-bit", markImage, podtest.Running()).Container("istio-proxy", markImage, podtest.Running()).Build()
	now := exitAt.Add(10 * time.Second)
	p := Decide(Input{Pod: pod, Node: virtual, CRRAPI: true, Now: now, Policy: DefaultPolicy(),
		Refusals: []Refusal{{Kind: ActionSwapImage, Containers: []string{"istio-proxy"}, Code: 500, Count: 1, At: now.Add(-time.Second)}}})
	for _, a := range p.Actions {
		if a.Kind == ActionSwapImage {
			t.Errorf("swap %+v sent again within its backoff", a)
		}
	}
	if p.RequeueAfter <= 0 || p.RequeueAfter > DefaultPolicy().RetryBackoff {
		t.Errorf("requeue %s, want the rest of the backoff", p.RequeueAfter)
	}
}

// A stage's retry (its first CRR past the deadline, still Recreating) does
// not delete the stage's own first CRR: only earlier stages' CRRs are
// cleared before a stage's CRR.
func TestAStagesRetryDoesNotDeleteItsOwnCRR(t *testing.T) {
	pod := ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Running()).Container("istio-proxy", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).Build()
	crr := crrOfStage(1, 1, "Recreating", exitAt.Add(10*time.Second), "fluent-bit")
	crr.Deadline = time.Minute
	st0 := crrOfStage(0, 1, "Completed", exitAt.Add(time.Second), "istio-proxy")
	st0.Completed = exitAt.Add(6 * time.Second)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: exitAt.Add(10*time.Second + 3*time.Minute), Policy: DefaultPolicy(),
		CRRs: []CRR{st0, crr}})
	retry := false
	for _, a := range p.Actions {
		if a.Kind == ActionDeleteCRR {
			t.Errorf("delete %+v before the stage's retry", a)
		}
		retry = retry || (a.Kind == ActionCreateCRR && a.Stage == 1 && a.Attempt == 2)
	}
	if !retry {
		t.Fatalf("actions %+v, want stage 1's second attempt", p.Actions)
	}
}

// A refused CRR of an earlier stage is no refusal of this stage's: stage 0's
// CRR for istio-proxy was refused a second ago (istio-proxy has stopped
// since), and stage 1's first CRR is made now, not after that backoff.
func TestAnEarlierStagesRefusedCRRDoesNotHoldTheNextStage(t *testing.T) {
	pod := ordered("fluent-bit").Container("fluent-bit", markCRR, podtest.Running()).
		Container("istio-proxy", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).Build()
	now := exitAt.Add(10 * time.Second)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(),
		Refusals: []Refusal{{Kind: ActionCreateCRR, Containers: []string{"istio-proxy"}, Attempt: 1, Code: 500, Count: 1, At: now.Add(-time.Second)}}})
	if len(p.Actions) != 1 || p.Actions[0].Kind != ActionCreateCRR || p.Actions[0].Stage != 1 || p.Actions[0].Attempt != 1 {
		t.Errorf("actions %+v (%s), want stage 1's first CRR now", p.Actions, p.Reason)
	}
}

// A swapped sidecar that has not terminated is followed through: within the
// pod's grace plus the start allowance it is the stop under way; at that
// bound exactly it is called stuck, with a Warning.
func TestASwappedSidecarIsStuckAtExactlyTheBound(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, podtest.Image(quickExit), podtest.Running()).Build()
	swapped := exitAt.Add(time.Second)
	bound := 30*time.Second + DefaultPolicy().SwapStartAllowance
	for _, tc := range []struct {
		at    time.Duration
		stuck bool
	}{{bound - time.Second, false}, {bound, true}} {
		p := Decide(Input{Pod: pod, Node: virtual, CRRAPI: true, Now: swapped.Add(tc.at), Policy: DefaultPolicy(),
			SwappedAt: map[string]time.Time{"log": swapped}})
		stuck := false
		for _, pr := range p.Problems {
			stuck = stuck || pr.Reason == ReasonQuickExitNotRunning
		}
		if stuck != tc.stuck || p.RequeueAfter <= 0 {
			t.Errorf("%s after the swap: stuck %v (problems %+v), requeue %s; want stuck %v and a requeue", tc.at, stuck, p.Problems, p.RequeueAfter, tc.stuck)
		}
	}
}

// The start allowance is the policy's, or the default when the policy
// leaves it unset (zero).
func TestSwapStartAllowanceIsThePolicysOrTheDefault(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, podtest.Image(quickExit), podtest.Running()).Build()
	swapped := exitAt.Add(time.Second)
	for _, tc := range []struct {
		allowance time.Duration
		at        time.Duration
		stuck     bool
	}{
		{0, 30*time.Second + DefaultPolicy().SwapStartAllowance - time.Second, false},
		{0, 30*time.Second + DefaultPolicy().SwapStartAllowance, true},
		{10 * time.Second, 39 * time.Second, false},
		{10 * time.Second, 40 * time.Second, true},
	} {
		policy := DefaultPolicy()
		policy.SwapStartAllowance = tc.allowance
		p := Decide(Input{Pod: pod, Node: virtual, CRRAPI: true, Now: swapped.Add(tc.at), Policy: policy,
			SwappedAt: map[string]time.Time{"log": swapped}})
		stuck := false
		for _, pr := range p.Problems {
			stuck = stuck || pr.Reason == ReasonQuickExitNotRunning
		}
		if stuck != tc.stuck {
			t.Errorf("allowance %s, %s after the swap: stuck %v, want %v", tc.allowance, tc.at, stuck, tc.stuck)
		}
	}
}

// A failed CRR whose retry waits its backoff is recorded on the pod (the
// attempts annotation) once: not when the pod already records it, and not
// when the retry is made at once (it records its own number as it is sent).
func TestAFailedAttemptIsRecordedOnlyWhileTheRetryWaits(t *testing.T) {
	pod := func(recorded string) *corev1.Pod {
		b := podtest.Pod("p").UID("u").Container("main", exited(0)).Container("log", markCRR, podtest.Running())
		if recorded != "" {
			b = b.Annotate(AnnotationCRRAttempts, recorded)
		}
		return b.Build()
	}
	failed := CRR{Name: "p-u-st1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: exitAt, Completed: exitAt.Add(10 * time.Second),
		RestartCounts: map[string]int32{"log": 0}}
	for _, tc := range []struct {
		name     string
		recorded string
		after    time.Duration
		record   string
		retry    bool
	}{
		{"in the backoff", "", time.Second, "1", false},
		{"in the backoff, already recorded", "1", time.Second, "", false},
		{"past the backoff", "", time.Minute, "", true},
	} {
		p := Decide(Input{Pod: pod(tc.recorded), Node: normal, CRRAPI: true, Now: failed.Completed.Add(tc.after), Policy: DefaultPolicy(), CRRs: []CRR{failed}})
		retry := len(p.Actions) == 1 && p.Actions[0].Attempt == 2
		if p.RecordAttempts != tc.record || retry != tc.retry {
			t.Errorf("%s: record %q, actions %+v; want record %q, a retry %v", tc.name, p.RecordAttempts, p.Actions, tc.record, tc.retry)
		}
	}
}

// A sidecar still running under its CRR in flight, with the restart count
// the CRR recorded, is being stopped: it did not come back (only a restart
// since would say so), so the controller waits for the CRR.
func TestASidecarUnderItsCRRWithTheSameRestartCountIsBeingStopped(t *testing.T) {
	pod := podtest.Pod("p").UID("u").Container("main", exited(0)).Container("log", markCRR, podtest.Running(), podtest.Restarts(2)).Build()
	crr := CRR{Name: "p-u-st1", Attempt: 1, Containers: []string{"log"}, Phase: "Recreating", Created: exitAt.Add(time.Second), Deadline: time.Minute,
		RestartCounts: map[string]int32{"log": 2}}
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: exitAt.Add(5 * time.Second), Policy: DefaultPolicy(), CRRs: []CRR{crr}})
	if len(p.Actions) != 0 || len(p.FailedKills) != 0 || !strings.Contains(p.Reason, "is being stopped by p-u-st1") {
		t.Errorf("actions %+v, failed kills %v, reason %q; want the CRR waited for", p.Actions, p.FailedKills, p.Reason)
	}
}

// A stop-stage mark that cannot be read (its time is not a time) reads as
// none: no stage counts as issued, and the order starts at stage 0.
func TestAnUnreadableStageMarkIsNone(t *testing.T) {
	pod := ordered("fluent-bit").Annotate(AnnotationStopStage, "1 not-a-time").
		Container("fluent-bit", markCRR, podtest.Running()).Container("istio-proxy", markCRR, podtest.Running()).Build()
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: exitAt.Add(time.Second), Policy: DefaultPolicy()})
	if p.Stage == nil || p.Stage.Stage != 0 || len(p.Actions) != 1 || strings.Join(p.Actions[0].Containers, ",") != "istio-proxy" {
		t.Errorf("stage %+v, actions %+v; want stage 0 stopping istio-proxy only", p.Stage, p.Actions)
	}
}

// Stage 2's first CRR waits behind stage 1's CRR, still in flight, whose
// deletion was refused: a first attempt has no failed attempt to record.
func TestAFirstStageCRRThatWaitsRecordsNoAttempt(t *testing.T) {
	pod := ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).
		Container("istio-proxy", markCRR, podtest.Running()).Build()
	st1 := crrOfStage(1, 1, "Recreating", exitAt.Add(time.Second), "fluent-bit")
	st1.Deadline = 10 * time.Minute
	now := exitAt.Add(20 * time.Second)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), CRRs: []CRR{st1},
		Refusals: []Refusal{deleteRefused(1, now.Add(-time.Second))}})
	if len(p.Actions) != 0 || p.Stage == nil || p.Stage.Stage != 2 || !strings.Contains(p.Reason, "waits") {
		t.Fatalf("stage %+v, actions %+v, reason %q; want stage 2's CRR waiting", p.Stage, p.Actions, p.Reason)
	}
	if p.RecordAttempts != "" {
		t.Errorf("records attempts %q for a first attempt", p.RecordAttempts)
	}
}

// Stage 2's first CRR failed (istio-proxy still runs after it completed)
// and its retry waits behind an earlier stage's CRR in flight whose
// deletion was refused: the failed attempt is recorded now, as kill does for
// a retry that waits its backoff, so kruise deleting that CRR cannot reset
// the count.
func TestAStageRetryThatWaitsRecordsTheFailedAttempt(t *testing.T) {
	pod := ordered("fluent-bit,istio-proxy").Container("fluent-bit", markCRR, podtest.Exited(137, exitAt.Add(5*time.Second))).
		Container("istio-proxy", markCRR, podtest.Running()).Build()
	st1 := crrOfStage(1, 1, "Recreating", exitAt.Add(time.Second), "fluent-bit")
	st1.Deadline = 10 * time.Minute
	st2 := crrOfStage(2, 1, "Completed", exitAt.Add(6*time.Second), "istio-proxy")
	st2.Completed = exitAt.Add(8 * time.Second)
	now := exitAt.Add(time.Minute)
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(), CRRs: []CRR{st1, st2},
		Refusals: []Refusal{deleteRefused(1, now.Add(-time.Second))}})
	if len(p.Actions) != 0 || p.RecordAttempts != AttemptsMark(2, 1) {
		t.Errorf("actions %+v, records %q (%s); want the retry waiting and attempt 1 of stage 2 recorded", p.Actions, p.RecordAttempts, p.Reason)
	}
}

// A refused write whose backoff ends exactly now is sent now: the settle
// (ignore-exit-code sidecar) and the swap alike, with no extra recheck.
func TestARefusedWriteIsSentAgainWhenItsBackoffEnds(t *testing.T) {
	backoff := DefaultPolicy().RetryBackoff
	settle := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, ignoreRC).Build()
	p := Decide(Input{Pod: settle, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy(),
		Refusals: []Refusal{{Kind: ActionSettlePhase, Containers: []string{"log"}, Code: 500, Count: 1, At: now.Add(-backoff)}}})
	if len(p.Actions) != 1 || p.Actions[0].Kind != ActionSettlePhase {
		t.Errorf("settle at the end of its backoff: actions %+v (%s), want the settle", p.Actions, p.Reason)
	}
	swap := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, podtest.Running()).Build()
	p = Decide(Input{Pod: swap, Node: virtual, CRRAPI: true, Now: now, Policy: DefaultPolicy(),
		Refusals: []Refusal{{Kind: ActionSwapImage, Containers: []string{"log"}, Code: 500, Count: 1, At: now.Add(-backoff)}}})
	if len(p.Actions) != 1 || p.Actions[0].Kind != ActionSwapImage || p.RequeueAfter != 0 {
		t.Errorf("swap at the end of its backoff: actions %+v, requeue %s; want the swap and no recheck", p.Actions, p.RequeueAfter)
	}
}

// The second terminator's Warning is added to a plan that did not need it,
// once: not again to a plan that has it, and not without a terminator or a
// pod. explain says "(none yet)" for its CRR's phase before kruise sets one.
func TestWithSecondTerminatorWarnsOnce(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, exited(0)).Build()
	st := &SecondTerminator{CRR: "kruise-crr", Containers: []string{"log"}}
	count := func(p Plan) int {
		n := 0
		for _, pr := range p.Problems {
			if pr.Reason == ReasonSecondTerminator {
				n++
			}
		}
		return n
	}
	base := Plan{Verdict: VerdictDone, Problems: []Problem{{Reason: ReasonUnknownSidecarName, Message: "other"}}}
	once := WithSecondTerminator(base, Input{Pod: pod, SecondTerminator: st})
	if count(once) != 1 || len(once.Problems) != 2 {
		t.Errorf("problems %+v, want the other one and one %s", once.Problems, ReasonSecondTerminator)
	}
	if twice := WithSecondTerminator(once, Input{Pod: pod, SecondTerminator: st}); count(twice) != 1 {
		t.Errorf("applied twice: %d Warnings", count(twice))
	}
	if count(WithSecondTerminator(base, Input{Pod: pod})) != 0 || count(WithSecondTerminator(base, Input{SecondTerminator: st})) != 0 {
		t.Errorf("a Warning without a terminator or without a pod")
	}
	once.SecondTerminator = st
	if out := explain(t, once); !strings.Contains(out, "(phase (none yet))") {
		t.Errorf("explain without a phase:\n%s", out)
	}
}

// Stage 1's sidecar was held up past its bound, so stage 2 was stopped
// beside it; it terminated 20 s after stage 2's CRR was made. Stage 2's
// bound counts from then, not from its CRR: stage 2 still holds stage 3 up
// 45 s after its CRR (bound 40 s), until 60 s after it.
func TestAStagesBoundCountsFromTheEarlierStagesLateFinish(t *testing.T) {
	issued := exitAt.Add(50 * time.Second)
	pod := ordered("a,b,c").Container("a", markCRR, podtest.Exited(137, issued.Add(20*time.Second))).
		Container("b", markCRR, podtest.Running()).Container("c", markCRR, podtest.Running()).Build()
	st1 := crrOfStage(1, 1, "Completed", exitAt.Add(time.Second), "a")
	st1.Completed = exitAt.Add(61 * time.Second)
	st2 := crrOfStage(2, 1, "Recreating", issued, "b")
	st2.Deadline = 10 * time.Minute
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: issued.Add(45 * time.Second), Policy: DefaultPolicy(), CRRs: []CRR{st1, st2}})
	if p.Stage == nil || p.Stage.Stage != 2 || len(p.Stage.HeldUp) != 0 || !p.Stage.Until.Equal(issued.Add(60*time.Second)) {
		t.Errorf("stage %+v, want stage 2 holding stage 3 up until %s", p.Stage, issued.Add(60*time.Second))
	}
}
