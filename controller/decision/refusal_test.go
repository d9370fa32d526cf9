package decision_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The answers of OpenKruise's CRR webhook (failurePolicy Fail) as the client
// sees them, and an admission policy's answer to an image patch.
var (
	webhookDown = Refusal{Kind: ActionCreateCRR, Containers: []string{"log"}, Attempt: 1, Code: 500, Reason: "InternalError",
		Message: `Internal error occurred: failed calling webhook "mcontainerrecreaterequest.kb.io": connection refused`, Count: 1, At: now}
	gateOff = Refusal{Kind: ActionCreateCRR, Containers: []string{"log"}, Attempt: 1, Code: 403, Permanent: true,
		Message: `admission webhook "mcontainerrecreaterequest.kb.io" denied the request: feature-gate KruiseDaemon is not enabled`, Count: 1, Permanents: 1, At: now}
	policyNo = Refusal{Kind: ActionSwapImage, Containers: []string{"log"}, Code: 422, Reason: "Invalid", Permanent: true,
		Message: `pods "p" is forbidden: ValidatingAdmissionPolicy 'images' denied request`, Count: 1, Permanents: 1, At: now}
)

// refused is r refused count times in a row, the latest at at; a permanent
// refusal every time.
func refused(r Refusal, count int, at time.Time) Refusal {
	r.Count, r.At = count, at
	if r.Permanent {
		r.Permanents = count
	}
	return r
}

func TestDecideRefusals(t *testing.T) {
	withImage := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	crrOnly := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build()
	imageOnly := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage).Build()
	bothOnVirtual := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage).Build()
	p := DefaultPolicy()

	cases := map[string]struct {
		pod      *corev1.Pod
		node     Node
		crrs     []CRR
		refusals []Refusal
		want     want
	}{
		// Issue item 1: a refused CRR is a failed kill, decided on.
		"CRR refused (webhook down, 500), image known: failed kill, swap at once": {
			pod: withImage, refusals: []Refusal{webhookDown},
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))},
				problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"CRR refused (feature gate off, 403), image known: failed kill, swap at once": {
			pod: withImage, refusals: []Refusal{gateOff},
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))},
				problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"CRR refused (500), no image: Warning, same attempt again after the backoff": {
			pod: crrOnly, refusals: []Refusal{webhookDown},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"},
				requeue: p.RetryBackoff},
		},
		"CRR refused (500), backoff passed: the same attempt (same name) is sent again": {
			pod: crrOnly, refusals: []Refusal{refused(webhookDown, 1, now.Add(-p.RetryBackoff))},
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")},
				problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"CRR refused (500) three times: the backoff doubles": {
			pod: crrOnly, refusals: []Refusal{refused(webhookDown, 3, now)},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"},
				requeue: 4 * p.RetryBackoff},
		},
		"CRR refused (500) many times: the backoff is capped": {
			pod: crrOnly, refusals: []Refusal{refused(webhookDown, p.MaxRefusals-1, now)},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"},
				requeue: p.RefusalBackoffMax},
		},
		"CRR refused (500) MaxRefusals times: final Warning, no write": {
			pod: crrOnly, refusals: []Refusal{refused(webhookDown, p.MaxRefusals, now.Add(-time.Hour))},
			want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarKillFailed, ReasonSidecarKillGaveUp, ReasonNoTerminationPath},
				failed: []string{"log"}},
		},
		"CRR refused permanently (403) once, no image: asked again after the short backoff (an API server just restarted answers 403 until its authorizer has synced)": {
			pod: crrOnly, refusals: []Refusal{gateOff},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"},
				requeue: p.RetryBackoff},
		},
		"CRR refused permanently twice: the long backoff": {
			pod: crrOnly, refusals: []Refusal{refused(gateOff, 2, now)},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"},
				requeue: p.RefusalBackoffMax},
		},
		"CRR refused for a broken connection, then permanently (403) once: not given up, the short backoff": {
			pod: crrOnly, refusals: []Refusal{func() Refusal { r := gateOff; r.Count = 2; return r }()},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"},
				requeue: p.RetryBackoff},
		},
		"CRR refused permanently three times: give up with a Warning": {
			pod: crrOnly, refusals: []Refusal{refused(gateOff, 3, now.Add(-time.Hour))},
			want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarKillFailed, ReasonSidecarKillGaveUp, ReasonNoTerminationPath},
				failed: []string{"log"}},
		},
		"CRR create timed out (may have been applied): no failed kill, the same create again after the backoff": {
			pod: withImage, refusals: []Refusal{{Kind: ActionCreateCRR, Containers: []string{"log"}, Attempt: 1, MaybeApplied: true,
				Message: "context deadline exceeded", Count: 1, At: now}},
			want: want{verdict: VerdictInProgress, requeue: p.RetryBackoff},
		},
		"CRR refused, but the cache shows it after all: no failed kill, wait for it": {
			pod: withImage, refusals: []Refusal{webhookDown},
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Recreating", Created: now}},
			want: want{verdict: VerdictInProgress, requeue: p.CRRDeadline + time.Second},
		},
		"second attempt refused: its retry keeps attempt 2": {
			pod: crrOnly, refusals: []Refusal{{Kind: ActionCreateCRR, Containers: []string{"log"}, Attempt: 2, Code: 500, Count: 1, At: now.Add(-time.Minute)}},
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: t0, Completed: t0}},
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 2, "log"), recorded(0, 2, time.Time{})}, problems: []string{ReasonSidecarKillFailed},
				failed: []string{"log"}},
		},

		// A refused image patch (issue 17 item 3): a Warning, a long backoff, then a give-up; never a storm.
		"swap refused by an admission policy (422): Warning, short backoff once": {
			pod: imageOnly, refusals: []Refusal{policyNo},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, requeue: p.RetryBackoff},
		},
		"swap refused by an admission policy twice: long backoff": {
			pod: imageOnly, refusals: []Refusal{refused(policyNo, 2, now)},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, requeue: p.RefusalBackoffMax},
		},
		"swap refused for good, no CRR mark: give up, no path": {
			pod: imageOnly, refusals: []Refusal{refused(policyNo, 3, now.Add(-time.Hour))},
			want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarKillFailed, ReasonNoTerminationPath}},
		},
		"swap refused for good on a virtual node: no path": {
			pod: bothOnVirtual, node: virtual, refusals: []Refusal{refused(policyNo, 3, now.Add(-time.Hour))},
			want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarKillFailed, ReasonNoTerminationPath}},
		},
		"swap refused for good after a failed CRR: the CRR path is used again": {
			pod:      withImage,
			crrs:     []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: t0, Completed: t0}},
			refusals: []Refusal{refused(policyNo, 3, now.Add(-time.Hour))},
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 2, "log"), recorded(0, 2, time.Time{})},
				problems: []string{ReasonSidecarKillFailed, ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Node: tc.node, CRRs: tc.crrs, CRRAPI: true, Refusals: tc.refusals, Now: now, Policy: DefaultPolicy()}
			if in.Node.Name == "" {
				in.Node = normal
			}
			plan := Decide(in)
			checkPlan(t, tc.want, plan)
			// A refusal's Warning names the HTTP status and the answer.
			for _, pr := range plan.Problems {
				if pr.Reason != ReasonSidecarKillFailed || len(tc.refusals) == 0 || tc.refusals[0].Code == 0 || len(tc.crrs) > 0 {
					continue
				}
				r := tc.refusals[0]
				if !strings.Contains(pr.Message, "HTTP") || !strings.Contains(pr.Message, r.Message) {
					t.Errorf("Warning %q does not name the status and the answer %q", pr.Message, r.Message)
				}
			}
		})
	}
}

func TestDecideSettleRefused(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, ignoreRC).Build()
	r := Refusal{Kind: ActionSettlePhase, Containers: []string{"log"}, Code: 403, Permanent: true, Message: "forbidden", Count: 2, Permanents: 2, At: now}
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Refusals: []Refusal{r}, Now: now, Policy: DefaultPolicy()})
	if plan.Verdict != VerdictInProgress || len(plan.Actions) != 0 || plan.RequeueAfter != DefaultPolicy().RefusalBackoffMax ||
		len(plan.Problems) != 1 || plan.Problems[0].Reason != ReasonPhaseSettleRefused {
		t.Fatalf("refused settle: %s %v %s %+v", plan.Verdict, plan.Actions, plan.RequeueAfter, plan.Problems)
	}
	r.Count, r.Permanents, r.At = 3, 3, now.Add(-time.Hour)
	plan = Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Refusals: []Refusal{r}, Now: now, Policy: DefaultPolicy()})
	if plan.Verdict != VerdictNoPath || len(plan.Actions) != 0 {
		t.Fatalf("settle refused three times: %s %v", plan.Verdict, plan.Actions)
	}
}

// Issue item 2: a swapped sidecar that does not terminate within the pod's
// grace period plus the start allowance gets a Warning naming why, and the
// pod stays queued.
func TestDecideSwapFollowThrough(t *testing.T) {
	bound := 30*time.Second + DefaultPolicy().SwapStartAllowance
	pull := podtest.Waiting("ImagePullBackOff", nil)
	cases := map[string]struct {
		status   podtest.Option
		node     Node
		swapped  time.Time // zero: the reconciler has no time (first seen now)
		want     want
		mentions string
	}{
		"first seen swapped (a restarted controller): the bound counts from the mains' exit, the earliest the swap can have been": {
			status: pull, node: virtual,
			want: want{verdict: VerdictInProgress, requeue: bound - now.Sub(exitAt)},
		},
		"within the bound: wait the rest": {
			status: pull, node: virtual, swapped: now.Add(-time.Minute),
			want: want{verdict: VerdictInProgress, requeue: bound - time.Minute},
		},
		"image does not pull past the bound: Warning naming ImagePullBackOff, still queued": {
			status: pull, node: virtual, swapped: now.Add(-bound),
			want:     want{verdict: VerdictInProgress, problems: []string{ReasonQuickExitNotRunning}, requeue: bound},
			mentions: "ImagePullBackOff",
		},
		"container does not start past the bound (normal node): Warning naming StartError": {
			status: podtest.Waiting("StartError", nil), node: normal, swapped: now.Add(-2 * bound),
			want:     want{verdict: VerdictInProgress, problems: []string{ReasonQuickExitNotRunning}, requeue: bound},
			mentions: "StartError",
		},
		"provider ignored the update past the bound: Warning naming the image it still runs": {
			status: podtest.Running(), node: virtual, swapped: now.Add(-bound),
			want:     want{verdict: VerdictInProgress, problems: []string{ReasonQuickExitNotRunning}, requeue: bound},
			mentions: "example.com/log:1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, tc.status).Build()
			pod.Spec.Containers[1].Image = quickExit // swapped; the status keeps what the node reports
			in := Input{Pod: pod, Node: tc.node, CRRAPI: true, Now: now, Policy: DefaultPolicy()}
			if !tc.swapped.IsZero() {
				in.SwappedAt = map[string]time.Time{"log": tc.swapped}
			}
			plan := Decide(in)
			got := want{verdict: plan.Verdict, actions: plan.Actions, failed: plan.FailedKills, requeue: plan.RequeueAfter}
			for _, p := range plan.Problems {
				got.problems = append(got.problems, p.Reason)
				if !strings.Contains(p.Message, tc.mentions) {
					t.Errorf("Warning %q does not name %q", p.Message, tc.mentions)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan differs (-want +got):\n%s\nreason: %s", diff, plan.Reason)
			}
			if tc.swapped.IsZero() != (len(plan.SwapsUnseen) == 1) {
				t.Errorf("SwapsUnseen %v with swapped time %v", plan.SwapsUnseen, tc.swapped)
			}
		})
	}
}

// A refusal names its status for a person: the HTTP code with its reason
// when the server gave one, the code alone when not, "no answer" without
// one.
func TestARefusalIsDescribedByItsCodeAndReason(t *testing.T) {
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
