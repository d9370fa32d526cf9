package reconciler

import (
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// A pod waits when its main containers are done and a sidecar still runs:
// the controller is about to stop it (Act), is stopping it (InProgress), or
// has no way to (NoPath). The oldest wait is what an alert on "sidecars
// outlive their mains for over N minutes" needs, without a series per pod.

// noteWaiting records when the pod's wait began, or that it does not wait.
func (r *Reconciler) noteWaiting(m *podMemory, plan decision.Plan) {
	since := time.Time{}
	switch plan.Verdict {
	case decision.VerdictAct, decision.VerdictInProgress, decision.VerdictNoPath:
		since = plan.MainsDoneAt
	}
	r.mu.Lock()
	m.waiting(since)
	r.mu.Unlock()
}

// oldestWaiting is the age in seconds of the longest wait among the pods the
// reconciler remembers (a deleted pod is forgotten), 0 when none waits.
func (r *Reconciler) oldestWaiting() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Time
	for _, m := range r.pods {
		if since := m.waitingSinceTime(); !since.IsZero() && (oldest.IsZero() || since.Before(oldest)) {
			oldest = since
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return r.clock.Since(oldest).Seconds()
}

// watchWaiting makes the gauge read f.
func (m *Metrics) watchWaiting(f func() float64) { m.waiting.Store(&f) }
