package decision

import (
	"fmt"
	"time"
)

// Refusal is a write the cluster refused (an admission webhook or policy, the
// API server, a CRD gone), as the reconciler remembers it for the pod. It is
// a decision input like the pod itself: a refused CRR is a failed kill, and a
// refused write is retried on a schedule the decision sets, never blindly.
type Refusal struct {
	Kind       ActionKind
	Containers []string
	// Attempt is the CRR attempt that was refused; the CRR was not created,
	// so the retry keeps its number (and its deterministic name).
	Attempt int
	// CRRName is the CRR the write was for: the one a refused deletion
	// leaves in place, or the one a refused create did not make.
	CRRName string
	// Code is the HTTP status (0 when no answer came: a timeout, a broken
	// connection); Reason is the API's StatusReason where it gave one.
	Code   int32
	Reason string
	// Message is the webhook's or the API server's answer, bounded.
	Message string
	// Permanent: asking again will get the same answer until someone changes
	// the cluster (Forbidden, Invalid other than our own test op, BadRequest,
	// the API not found). Otherwise transient: 5xx, 429, timeouts.
	Permanent bool
	// MaybeApplied: no answer came (a timeout, a broken connection), so the
	// write may have been applied. Such a refusal is not a failed kill: the
	// same write is sent again, and finds its work done if it was.
	MaybeApplied bool
	// Count is how many times in a row this kind of write was refused for
	// the pod; Permanents how many of those were permanent; At is the latest.
	Count      int
	Permanents int
	At         time.Time
}

// MaxRefusalMessage bounds the refusal text carried into events and logs:
// a webhook's message is written by someone else.
const MaxRefusalMessage = 256

// permanentRefusalTries is how many permanent refusals of a write the
// controller takes before it gives up. One answer is not proof: an API
// server that has just restarted answers 403 until its authorizer's caches
// have synced (seen in `make chaos`, apiserver-restart: a CRR create refused
// "cannot create resource" 7 s after a broken connection, then allowed), so
// the first permanent refusal is asked again after the short backoff; the
// second after the long one, in case the operator fixed the cause (a feature
// gate, a policy) in the meantime; the third is final. Transient refusals
// before them do not count towards these three.
const permanentRefusalTries = 3

// Describe names the refusal for a person: the status and the answer.
func (r Refusal) Describe() string {
	status := "no answer"
	if r.Code != 0 {
		status = fmt.Sprintf("HTTP %d", r.Code)
		if r.Reason != "" {
			status += " " + r.Reason
		}
	}
	return fmt.Sprintf("%s: %s", status, r.Message)
}

// latestRefusal returns the refusal of a write of this kind that named the
// container, if the reconciler remembers one.
func latestRefusal(refusals []Refusal, kind ActionKind, container string) *Refusal {
	if container == "" {
		for i := range refusals {
			if refusals[i].Kind == kind {
				return &refusals[i]
			}
		}
		return nil
	}
	for i := range refusals {
		if refusals[i].Kind == kind && contains(refusals[i].Containers, container) {
			return &refusals[i]
		}
	}
	return nil
}

// refusalWait says what to do about a refused write: retry now (zero, false),
// wait (the time left, false), or give up (true). Transient refusals back off
// from RetryBackoff, doubling up to RefusalBackoffMax, and give up after
// MaxRefusals; permanent ones are retried once after RetryBackoff, once
// after RefusalBackoffMax, and then given up (permanentRefusalTries).
func refusalWait(r *Refusal, p Policy, now time.Time) (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	def := DefaultPolicy()
	if p.MaxRefusals <= 0 {
		p.MaxRefusals = def.MaxRefusals
	}
	if p.RefusalBackoffMax <= 0 {
		p.RefusalBackoffMax = def.RefusalBackoffMax
	}
	limit, backoff := p.MaxRefusals, p.RetryBackoff
	for i := 1; i < r.Count && backoff < p.RefusalBackoffMax; i++ {
		backoff *= 2
	}
	if backoff > p.RefusalBackoffMax {
		backoff = p.RefusalBackoffMax
	}
	if r.Count >= limit {
		return 0, true
	}
	if r.Permanent {
		if r.Permanents >= permanentRefusalTries {
			return 0, true
		}
		backoff = p.RefusalBackoffMax
		if r.Permanents <= 1 {
			backoff = p.RetryBackoff
		}
	}
	return r.At.Add(backoff).Sub(now), false
}

func refusedKill(r *Refusal, container string) Problem {
	what := "ContainerRecreateRequest"
	if r.Kind == ActionSwapImage {
		what = "image swap"
	}
	return Problem{Reason: ReasonSidecarKillFailed, Message: fmt.Sprintf(
		"the %s that stops container %q was refused (%s)", what, container, r.Describe())}
}

// swapAfterRefusal returns the quick-exit image the container may still be
// swapped to, and how long to wait before a refused swap is sent again. A
// swap refused for good leaves the container to a CRR, or to no path.
func (p *Plan) swapAfterRefusal(in Input, c Container) (string, time.Duration) {
	image := c.QuickExitImage
	if image == "" {
		image = c.DefaultImage
	}
	if image == "" {
		return "", 0
	}
	r := latestRefusal(in.Refusals, ActionSwapImage, c.Name)
	if r == nil {
		return image, 0
	}
	if !r.MaybeApplied {
		p.Problems = append(p.Problems, refusedKill(r, c.Name))
	}
	wait, gaveUp := refusalWait(r, in.Policy, in.Now)
	switch {
	case gaveUp:
		return "", 0
	case wait > 0:
		p.requeue(wait)
		return image, wait
	}
	return image, 0
}

// settleRefused handles a refused phase settle: wait out its backoff, or
// give up with a Warning. ok is false when the settle may be sent now.
func (p Plan) settleRefused(in Input, ignoring []Container) (Plan, bool) {
	r := latestRefusal(in.Refusals, ActionSettlePhase, "")
	if r == nil {
		return p, false
	}
	p.Problems = append(p.Problems, Problem{Reason: ReasonPhaseSettleRefused, Message: fmt.Sprintf(
		"settling the pod's phase before stopping ignore-exit-code sidecars %v was refused (%s)", names(ignoring), r.Describe())})
	wait, gaveUp := refusalWait(r, in.Policy, in.Now)
	switch {
	case gaveUp:
		return p.with(VerdictNoPath, fmt.Sprintf("settling the phase was refused %d times; giving up", r.Count)), true
	case wait > 0:
		p.requeue(wait)
		return p.with(VerdictInProgress, fmt.Sprintf("settling the phase is retried in %s, after it was refused", wait.Round(time.Second))), true
	}
	return p, false
}

// refusedCRRFor returns the refusal of a CRR that was meant to stop the
// container and was surely not created: one that may have been applied, or
// whose CRR the cache shows after all, is no failed kill.
func refusedCRRFor(in Input, container string) *Refusal {
	r := latestRefusal(in.Refusals, ActionCreateCRR, container)
	if r == nil || r.MaybeApplied {
		return nil
	}
	for _, c := range in.CRRs {
		if c.Attempt == r.Attempt {
			return nil
		}
	}
	return r
}
