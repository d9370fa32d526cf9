package sim

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Faults are the named knobs of what goes wrong. Zero is a healthy cluster.
type Faults struct {
	// WriteErrors: a write fails with a server error and is not applied.
	WriteErrors float64
	// WriteTimeouts: a write times out; half of them were applied anyway,
	// the ambiguous case a retry must survive.
	WriteTimeouts float64
	// Conflicts: a write is refused with a Conflict and not applied.
	Conflicts float64
	// CacheLag is how late the controller's informers see a change, with
	// CacheJitter (a fraction) around it.
	CacheLag    time.Duration
	CacheJitter float64
	// DropEvents: a watch event is lost; the informer sees the object again
	// only at the relist RelistAfter later.
	DropEvents  float64
	RelistAfter time.Duration
	// DupEvents: a notification is delivered twice.
	DupEvents float64
	// ReorderEvents: a notification is held back up to ReorderWindow, so it
	// may arrive after later ones.
	ReorderEvents float64
	ReorderWindow time.Duration
	// CrashEvery: the controller crashes (losing its memory, cache and
	// queue) on average this often and is back after RestartDelay.
	CrashEvery   time.Duration
	RestartDelay time.Duration
	// LeaderEvery: leadership moves on average this often; the new leader
	// starts LeaderOverlap before the old one notices it lost the lease, so
	// both write for a while.
	LeaderEvery   time.Duration
	LeaderOverlap time.Duration
	// CRRNeverCompleted: kruise never moves a CRR past Pending, not even
	// at its deadline.
	CRRNeverCompleted bool
	// CRRWebhook answers CRR creates from CRRWebhookFrom for CRRWebhookFor
	// (zero: to the end of the run) as refusals.go describes.
	CRRWebhook     WebhookAnswer
	CRRWebhookFrom time.Duration
	CRRWebhookFor  time.Duration
	// CRRTTL: kruise deletes finished CRRs this long after they finish,
	// whatever their ttlSecondsAfterFinished, so they go while the pod
	// still runs.
	CRRTTL time.Duration
	// KubeletPhaseWriteBack: after the controller settles a pod's phase,
	// the kubelet's status manager writes its cached phase (Running) back
	// once, before it syncs the pod, so the controller must settle again.
	KubeletPhaseWriteBack float64
	// WriteBackUnseen: the controller's watch loses the event of that
	// write-back, and its cache shows the phase written back only at the
	// relist; it stands for a watch that lags past the kubelet's grace.
	WriteBackUnseen bool
	// CRRLabelStripped: a policy engine strips our managed-by label from
	// every CRR as it is admitted, so the controller's informer, which
	// lists by that label, never shows the CRRs it made.
	CRRLabelStripped bool
	// APIServerRestart: kube-apiserver is down from APIServerDownFrom for
	// APIServerDownFor (every write: connection refused, not applied), then
	// serves but denies every write with RBAC's 403 for AuthzUnsyncedFor,
	// until its authorizer's caches have synced. Seen on the real API
	// server (make chaos, apiserver-restart): a CRR create and image patches
	// answered "cannot create resource" seconds after the restart.
	APIServerDownFrom time.Duration
	APIServerDownFor  time.Duration
	AuthzUnsyncedFor  time.Duration
}

func (f Faults) withDefaults() Faults {
	if f.CacheLag == 0 {
		f.CacheLag = 50 * time.Millisecond
	}
	if f.CacheJitter == 0 {
		f.CacheJitter = 0.5
	}
	if f.RelistAfter == 0 {
		f.RelistAfter = 2 * time.Minute
	}
	if f.ReorderWindow == 0 {
		f.ReorderWindow = 3 * time.Second
	}
	if f.RestartDelay == 0 {
		f.RestartDelay = 10 * time.Second
	}
	if f.LeaderOverlap == 0 {
		f.LeaderOverlap = 2 * time.Second
	}
	return f
}

// String names the active faults, for the report.
func (f Faults) String() string {
	var out []string
	add := func(on bool, format string, args ...any) {
		if on {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	add(f.WriteErrors > 0, "write-errors=%.2f", f.WriteErrors)
	add(f.WriteTimeouts > 0, "timeouts=%.2f", f.WriteTimeouts)
	add(f.Conflicts > 0, "conflicts=%.2f", f.Conflicts)
	add(f.CacheLag > time.Second, "lag=%s", f.CacheLag)
	add(f.DropEvents > 0, "drop=%.2f", f.DropEvents)
	add(f.DupEvents > 0, "dup=%.2f", f.DupEvents)
	add(f.ReorderEvents > 0, "reorder=%.2f", f.ReorderEvents)
	add(f.CrashEvery > 0, "crash/%s", f.CrashEvery)
	add(f.LeaderEvery > 0, "leader/%s", f.LeaderEvery)
	add(f.CRRNeverCompleted, "crr-never-completed")
	add(f.CRRWebhook != WebhookAdmits, "crr-webhook=%s@%s", f.CRRWebhook, f.CRRWebhookFrom)
	add(f.CRRTTL > 0, "crr-ttl=%s", f.CRRTTL)
	add(f.KubeletPhaseWriteBack > 0, "phase-write-back=%.2f", f.KubeletPhaseWriteBack)
	add(f.WriteBackUnseen, "write-back-unseen")
	add(f.CRRLabelStripped, "crr-label-stripped")
	add(f.APIServerDownFor > 0, "apiserver-restart@%s(down %s, 403 %s)", f.APIServerDownFrom, f.APIServerDownFor, f.AuthzUnsyncedFor)
	if len(out) == 0 {
		return "-"
	}
	return fmt.Sprint(out)
}

var podsResource = schema.GroupResource{Resource: "pods"}

// writeFault decides the fate of one write: an error before it is applied,
// or a timeout reported after (applied is then a coin toss).
func (s *Sim) writeFault(verb string) (before error, timeout bool) {
	f := s.sc.Faults
	if err := s.apiServerRestarting(verb); err != nil {
		return err, false
	}
	r := s.rng.Float64()
	switch {
	case r < f.WriteErrors:
		return apierrors.NewInternalError(fmt.Errorf("simulated server error on %s", verb)), false
	case r < f.WriteErrors+f.Conflicts:
		return apierrors.NewConflict(podsResource, verb, fmt.Errorf("simulated conflict")), false
	case r < f.WriteErrors+f.Conflicts+f.WriteTimeouts:
		if s.rng.IntN(2) == 0 {
			return apierrors.NewTimeoutError("simulated timeout, not applied", 1), false
		}
		return nil, true
	}
	return nil, false
}

// apiServerRestarting is the APIServerRestart fault's answer to a write now,
// or nil outside its window. It draws nothing from the random source, so the
// other faults' draws are the same with or without it.
func (s *Sim) apiServerRestarting(verb string) error {
	f := s.sc.Faults
	if f.APIServerDownFor <= 0 {
		return nil
	}
	down := Epoch.Add(f.APIServerDownFrom)
	up := down.Add(f.APIServerDownFor)
	now := s.now()
	switch {
	case now.Before(down):
		return nil
	case now.Before(up):
		return fmt.Errorf("dial tcp 127.0.0.1:6443: connect: connection refused (simulated restart, %s)", verb)
	case now.Before(up.Add(f.AuthzUnsyncedFor)):
		return apierrors.NewForbidden(podsResource, verb, fmt.Errorf(`User "system:serviceaccount:sidecar-terminator-system:sidecar-terminator" cannot %s: RBAC caches not synced yet (simulated)`, verb))
	}
	return nil
}
