package reconciler

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// What a failed write means for the pod.
type outcome int

const (
	// outcomeStale: the object moved on (a Conflict, our own JSON-patch test
	// op failing, the pod gone): decide again on fresh state, soon.
	outcomeStale outcome = iota
	// outcomeRefused: the cluster said no; the refusal is remembered for the
	// pod and decided on (a failed kill, a fallback, a backoff, a give-up).
	outcomeRefused
)

// classify tells a stale write from a refused one and, for a refusal, whether
// asking again can help. Permanent: Forbidden (a webhook's or RBAC's no, e.g.
// kruise's CRR webhook with its KruiseDaemon feature gate off), Invalid that
// is not our test op (an admission policy, the API server's validation),
// BadRequest (kruise's webhook checks), NotFound of the CRR API itself (the
// CRD removed). Transient: 5xx (a webhook with failurePolicy Fail whose
// server is down answers 500), 429, timeouts, broken connections.
func classify(err error, a decision.Action) (outcome, decision.Refusal) {
	switch {
	case apierrors.IsConflict(err), testOpFailed(err):
		return outcomeStale, decision.Refusal{}
	case apierrors.IsNotFound(err) && (a.Kind != decision.ActionCreateCRR || notFoundKind(err) == "pods"):
		// The pod is gone (or was replaced): the next sync sees it.
		return outcomeStale, decision.Refusal{}
	}
	r := decision.Refusal{Kind: a.Kind, Containers: a.Containers, Attempt: a.Attempt, CRRName: a.CRRName, Message: boundedMessage(err.Error())}
	if foreign := (*ForeignCRRError)(nil); errors.As(err, &foreign) {
		// Someone else's CRR under our name: asking again meets it again.
		r.Code, r.Reason, r.Permanent = http.StatusConflict, string(metav1.StatusReasonAlreadyExists), true
		return outcomeRefused, r
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		r.Code, r.Reason = s.Code, string(s.Reason)
	}
	switch {
	case noAnswer(err):
		// No answer, or one saying the request may still be processed.
		r.MaybeApplied = true
	case apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnauthorized(err):
	case a.Kind == decision.ActionCreateCRR && (apierrors.IsBadRequest(err) || apierrors.IsNotFound(err)):
		// Transient too. kruise's CRR webhook answers 400 from its own pod
		// cache, which can lag ours by a moment: "no containerID in X
		// containerStatus", "a pending Pod", "no found Pod" (kruise v1.9.1,
		// pkg/webhook/containerrecreaterequest/validating/
		// crr_mutating_handler.go); the CRR's own fields are ours and checked
		// at start. A 404 of the CRR API is rediscovered and retried: a CRD
		// just installed or upgraded answers 404 for a moment. Both get the
		// bounded retries with backoff; the rediscovery decides whether the
		// API is really gone. (Seen on the real node: a sidecar that started
		// as the main exited got a 400 whose retry came 5 minutes later.)
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsNotFound(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsRequestEntityTooLargeError(err):
		r.Permanent = true
	case r.Code >= http.StatusBadRequest && r.Code < http.StatusInternalServerError && r.Code != http.StatusTooManyRequests:
		// Any other 4xx, e.g. a webhook's own code with no reason attached.
		r.Permanent = true
	}
	return outcomeRefused, r
}

// noAnswer reports whether a write failed without the API server saying
// whether it was applied: no answer, or one saying it may still be.
func noAnswer(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status) || status.Status().Code == 0 || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// testOpFailed reports whether a JSON patch failed on one of its test ops,
// which is how our patches learn that the pod moved on. The API server
// answers a patch that does not apply with a bare 422 Invalid: no details,
// no causes, a fixed message (k8s.io/apiserver v0.35.4,
// pkg/endpoints/handlers/patch.go, applyJSPatch: NewGenericServerResponse(
// 422, "", GroupResource{}, "", err, 0, false)). Every other Invalid names
// what refused it: a ValidatingAdmissionPolicy or webhook names itself, the
// API server's validation names the object and the fields.
//
// Where the patch is applied in process (client-go's fake clientset), the
// json-patch library's own error comes back instead.
func testOpFailed(err error) bool {
	if errors.Is(err, jsonpatch.ErrTestFailed) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || (d.Kind == "" && d.Name == "" && len(d.Causes) == 0)
}

func notFoundKind(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		return status.Status().Details.Kind
	}
	return ""
}

// boundedMessage keeps a refusal's text fit for an event and a log line: the
// message is written by a webhook or a policy, not by us.
func boundedMessage(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= decision.MaxRefusalMessage {
		return s
	}
	cut := decision.MaxRefusalMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// refusalKinds orders the remembered refusals, so the decision's input (and
// the simulator's trace) never depends on map order.
var refusalKinds = []decision.ActionKind{decision.ActionCreateCRR, decision.ActionSwapImage, decision.ActionSettlePhase, decision.ActionDeleteCRR, decision.ActionRecordAttempt, decision.ActionRecordAPIGone}
