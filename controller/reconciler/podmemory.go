package reconciler

import (
	"maps"
	"slices"
	"strings"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// podMemory is what the reconciler remembers of one pod between syncs: the
// writes the cache has not shown, the refusals, the CRRs seen. It is a
// cache of what this replica saw and did, never the only evidence of a stop:
// the objects carry the stop window (decision/window.go), and what the
// memory cannot vouch for the plan confirms live (decision/confirm.go). A
// new leader's empty memory sees what the cluster shows; docs/design.md
// says what that leaves outside the contract.
//
// Its fields are read and written here only, by the methods below; the
// reconciler changes it in absorb alone (absorb.go), and reads it in observe
// (plan.go) and apply. The methods, by the moments of a sync:
//
//   - made: newPodMemory, when a pod is first synced or replaced by another
//     of the same name (isFor); it is cleared by dropping it (Reconciler.forget,
//     when the pod is gone or ignored outright);
//   - the cache's progress: the writes still unseen (pendingWrites,
//     waitedFor, cacheCaughtUp, stillUnseen) and the stale view
//     (staleViewAt, staleViewGone, staleOn);
//   - what the decision reads: rememberedCRRs, refusals, refusedCRRList,
//     swapTimes, secondTerminator, secondLooks, job, watchedSince
//     (Reconciler.observe);
//   - a write's answer: expect and wrote when it was accepted, refusedWrite
//     when it was refused; sentThisSync for a later round of the same sync;
//   - a seen CRR: seeCRR, madeCRR, liveCRRSeen, and the reads hasCRRs,
//     knowsCRR, crr;
//   - the record of a decision: firstWarning, firstFailedKill, swapped,
//     waiting/waitingSinceTime, lookForSecond, secondFound, noteSecond,
//     readJob, and the tracked flag (isTracked/setTracked);
//   - the echo note the informer's handlers read (echo.go): expectEcho
//     before a write, echoNoted and echoSeen. These alone are called with
//     the reconciler's lock held (Reconciler.mu), since the handlers run
//     beside the pod's sync; the rest of the memory only its sync touches.
type podMemory struct {
	uid types.UID
	// born is when this memory of the pod began (decision.Input.WatchedSince).
	born    time.Time
	pending []expectation
	since   time.Time // when pending was raised
	// waitingSince: when the mains finished, while sidecars still run (see waiting.go).
	waitingSince time.Time
	// swappedAt: when each sidecar was swapped (or, after a restart, first
	// seen swapped), for the swap's follow-through. A slice, not a map: a
	// pod has a sidecar or two, and a map of one entry costs eight slots.
	swappedAt []swap
	// crrs: the pod's CRRs as last seen (in the cache or live), sorted by
	// name (confirm.go reads them). A slice, not a map: a pod has a CRR or
	// two, and a map of one CRR keeps eight slots of them (a burst holds
	// thousands of pods' memories).
	crrs []decision.CRR
	// jobFacts is the pod's owning Job as read live, once, when a plan
	// asked for it (jobverdict.go).
	jobFacts *decision.JobFacts
	// echo: the last write of a burst whose echo the informer's handlers
	// have not seen yet (nil: none). Guarded by the reconciler's lock.
	echo *echoNote
	// rare holds what most pods never have (nil until first written): a
	// burst keeps every pod's memory, and these fields in each would be
	// 96 bytes more a pod (BenchmarkBurstHeapHeld's pod memories).
	rare *rareMemory
	// secondLooked: why OpenKruise's SidecarTerminator's CRR was looked for
	// (second.go's bits); secondNoted: it was noted in the log and metric.
	secondLooked uint32
	secondNoted  bool
	tracked      bool
}

// rareMemory is the part of a pod's memory most pods never need: Warnings
// and failed kills, refusals, a stale write, CRRs deleted or refused, and
// OpenKruise's SidecarTerminator's CRR.
type rareMemory struct {
	// warned and failed: the pod's Warnings (reason and message) and failed
	// kills (by container) already counted.
	warned map[string]bool
	failed map[string]bool
	// refused holds the latest refused write of each kind: a decision input
	// (decision.Input.Refusals). It lives here, with the pod's other memory,
	// and not in any cache of API objects: it is what this controller was
	// told, not what the cluster holds.
	refused map[decision.ActionKind]decision.Refusal
	// OpenKruise's SidecarTerminator's CRR for the pod, once found (second.go).
	second *decision.SecondTerminator
	// staleView is the cache's view (see Reconciler.view) on which a write
	// refused as stale was decided, at staleAt: not decided on again.
	staleView string
	staleAt   time.Time
	// deletedCRRs: when this controller deleted some of the pod's CRRs.
	deletedCRRs map[string]time.Time
	// refusedCRRs: CRR creates of this controller that were refused (or got
	// no answer and were not found made), by name (decision.Input.RefusedCRRs).
	refusedCRRs map[string]decision.Action
}

// rarely is the pod's rare memory, made on first use by a write to it.
func (m *podMemory) rarely() *rareMemory {
	if m.rare == nil {
		m.rare = &rareMemory{}
	}
	return m.rare
}

// seldom is the pod's rare memory for a read: the empty one when none was
// written (its nil maps read as empty).
func (m *podMemory) seldom() *rareMemory {
	if m.rare == nil {
		return &noRareMemory
	}
	return m.rare
}

// noRareMemory is what seldom reads for a pod with no rare memory; it is
// never written.
var noRareMemory rareMemory

// echoNote is what the echo checks (echo.go: podEcho, crrEcho) read of the
// noted write: its kind, the CRR a create makes, a swap's images. Only a
// burst's write is noted, with no stage and no stage mark (expectEcho), so
// the rest of the action is zero in it; a copy of the whole action would
// keep 192 bytes more a pod through a burst.
type echoNote struct {
	kind    decision.ActionKind
	crrName string
	swaps   []decision.Swap
}

// swap is when one sidecar was swapped.
type swap struct {
	container string
	at        time.Time
}

// expectation is one write whose effect the cache has not shown yet.
type expectation struct {
	action decision.Action
}

// madeCRR remembers a CRR this controller made (or found made: an own CRR
// under the name, a create applied although it got no answer), as sent and
// created now, unless a copy was seen already. The cache may never show it
// (a policy stripped the label the informer lists by) or may show it only
// after it is gone (deleted with its CRD while the cache lagged); either way
// kruise-daemon may be stopping its containers, and the decision must know.
// The answer's time is no earlier than the API server's creation time, so
// the deadline counted from it is no earlier than kruise-manager's.
func (m *podMemory) madeCRR(crr *kruisev1alpha1.ContainerRecreateRequest, at time.Time) {
	if m.knowsCRR(crr.Name) {
		return
	}
	made := crr.DeepCopy()
	made.CreationTimestamp = metav1.NewTime(at)
	m.seeCRR(crrFacts(made))
}

func (m *podMemory) seeCRR(c decision.CRR) {
	i, found := m.crrAt(c.Name)
	if found {
		m.crrs[i] = c
		return
	}
	m.crrs = slices.Insert(m.crrs, i, c)
}

// crrAt is where the CRR of that name is in crrs, or would be.
func (m *podMemory) crrAt(name string) (int, bool) {
	return slices.BinarySearchFunc(m.crrs, name, func(c decision.CRR, name string) int { return strings.Compare(c.Name, name) })
}

// crrDeleted records that this controller deleted the CRR (or may have: the
// request got no answer). A deleted CRR is finished for the decision.
func (m *podMemory) crrDeleted(name string, at time.Time) {
	r := m.rarely()
	if r.deletedCRRs == nil {
		r.deletedCRRs = map[string]time.Time{}
	}
	r.deletedCRRs[name] = at
}

// crrRefused records a CRR create of this controller that was refused.
func (m *podMemory) crrRefused(a decision.Action) {
	r := m.rarely()
	if r.refusedCRRs == nil {
		r.refusedCRRs = map[string]decision.Action{}
	}
	r.refusedCRRs[a.CRRName] = a
}

// rememberedCRRs are the remembered CRRs the cache does not show (cached:
// the CRRs it shows): as last seen, or finished when this controller deleted
// them. A CRR the cache shows is the cache's (newer) copy, even one deleted
// and made again.
func (m *podMemory) rememberedCRRs(cached []decision.CRR) []decision.CRR {
	var out []decision.CRR
	for _, c := range m.crrs {
		if slices.ContainsFunc(cached, func(k decision.CRR) bool { return k.Name == c.Name }) {
			continue
		}
		c.Unseen = true
		if at, ok := m.seldom().deletedCRRs[c.Name]; ok {
			c.Deleted = true
			if !c.Finished() {
				c.Phase, c.Completed, c.Message = "Completed", at, "deleted by this controller"
			}
		}
		out = append(out, c)
	}
	return out
}

// remember records a refusal in the pod's memory, counting refusals of the
// same write (same kind; for a CRR, the same attempt of the same one) in a row.
func (m *podMemory) remember(r decision.Refusal, now time.Time) decision.Refusal {
	rare := m.rarely()
	if rare.refused == nil {
		rare.refused = map[decision.ActionKind]decision.Refusal{}
	}
	r.Count, r.Permanents, r.At = 1, 0, now
	if prev, ok := rare.refused[r.Kind]; ok && prev.Attempt == r.Attempt && prev.CRRName == r.CRRName {
		r.Count, r.Permanents = prev.Count+1, prev.Permanents
	}
	if r.Permanent {
		r.Permanents++
	}
	rare.refused[r.Kind] = r
	return r
}

// refusals lists what the pod's memory holds, for the decision.
func (m *podMemory) refusals() []decision.Refusal {
	var out []decision.Refusal
	for _, k := range refusalKinds {
		if r, ok := m.seldom().refused[k]; ok {
			out = append(out, r)
		}
	}
	return out
}

func (m *podMemory) swapped(container string, at time.Time) {
	if !slices.ContainsFunc(m.swappedAt, func(s swap) bool { return s.container == container }) {
		m.swappedAt = append(m.swappedAt, swap{container: container, at: at})
	}
}

// sentThisSync reports whether the same write waits in the pod's
// expectations: sent and accepted in an earlier pass of this sync, which
// decides again on the same cache (a refusal of another write made it pass
// again). Sending it once more would be a second write for nothing, and a
// refusal of that second one would count as a failed kill.
func (m *podMemory) sentThisSync(a decision.Action) bool {
	for _, e := range m.pending {
		if e.action.Kind == a.Kind && e.action.CRRName == a.CRRName && slices.Equal(e.action.Containers, a.Containers) {
			return true
		}
	}
	return false
}

// expect remembers a write before it is sent; now is read only for the
// sync's first unseen write.
func (m *podMemory) expect(a decision.Action, now func() time.Time) {
	if len(m.pending) == 0 {
		m.since = now()
	}
	m.pending = append(m.pending, expectation{action: a})
}

// newPodMemory is the memory of a pod first synced (or replaced by another
// of the same name).
func newPodMemory(uid types.UID, now time.Time) *podMemory {
	return &podMemory{uid: uid, born: now}
}

// watchedSince is when this memory of the pod began.
func (m *podMemory) watchedSince() time.Time { return m.born }

// isFor reports whether this is the memory of the pod with this uid.
func (m *podMemory) isFor(uid types.UID) bool { return m.uid == uid }

// isTracked reports whether the pod counts in the pods-tracked gauge.
func (m *podMemory) isTracked() bool { return m.tracked }

// setTracked records whether the pod counts in the pods-tracked gauge.
func (m *podMemory) setTracked(tracked bool) { m.tracked = tracked }

// pendingWrites are the writes whose effect the cache has not shown yet.
func (m *podMemory) pendingWrites() []expectation { return m.pending }

// waitedFor is how long the cache has been waited for, at now.
func (m *podMemory) waitedFor(now time.Time) time.Duration { return now.Sub(m.since) }

// cacheCaughtUp forgets the pending writes: the cache shows them, or the
// wait for it timed out and the pod is decided afresh.
func (m *podMemory) cacheCaughtUp() { m.pending = nil }

// stillUnseen restarts the wait for writes the API server shows applied
// but the cache does not yet.
func (m *podMemory) stillUnseen(now time.Time) { m.since = now }

// staleOn records the cache's view on which a write refused as stale was
// decided, so that the pod is not decided on that view again.
func (m *podMemory) staleOn(view string, now time.Time) {
	r := m.rarely()
	r.staleView, r.staleAt = view, now
}

// staleViewAt is the view of a write refused as stale, and when it was
// refused; "" when none.
func (m *podMemory) staleViewAt() (string, time.Time) { r := m.seldom(); return r.staleView, r.staleAt }

// staleViewGone forgets the stale view: the cache moved past it.
func (m *podMemory) staleViewGone() {
	if m.rare != nil {
		m.rare.staleView = ""
	}
}

// wrote records a write the API server accepted: its kind's refusal is
// over, a CRR deleted or made is remembered (made: the CRR as sent, nil
// otherwise), the cache's lag is counted from the answer, and a swap's
// containers are swapped from now.
func (m *podMemory) wrote(a decision.Action, made *kruisev1alpha1.ContainerRecreateRequest, now func() time.Time) {
	if m.rare != nil {
		delete(m.rare.refused, a.Kind)
	}
	switch a.Kind {
	case decision.ActionDeleteCRR:
		m.crrDeleted(a.CRRName, now())
	case decision.ActionCreateCRR:
		m.madeCRR(made, now())
	}
	// The cache's lag is counted from the write's answer, not from its
	// start: a write slow at a loaded API server must not eat the wait.
	m.since = now()
	if a.Kind == decision.ActionSwapImage {
		for _, c := range a.Containers {
			m.swapped(c, now())
		}
	}
}

// refusedWrite records a refused write: the refusal, counted (remember), a
// delete that may have been applied as a deleted CRR, a refused create as
// such. It returns the refusal as counted.
func (m *podMemory) refusedWrite(a decision.Action, refusal decision.Refusal, now func() time.Time) decision.Refusal {
	refusal = m.remember(refusal, now())
	if a.Kind == decision.ActionDeleteCRR && refusal.MaybeApplied {
		m.crrDeleted(a.CRRName, now())
	}
	if a.Kind == decision.ActionCreateCRR {
		m.crrRefused(a)
	}
	return refusal
}

// hasCRRs reports whether any CRR of the pod is remembered.
func (m *podMemory) hasCRRs() bool { return len(m.crrs) > 0 }

// knowsCRR reports whether the CRR is remembered.
func (m *podMemory) knowsCRR(name string) bool {
	_, known := m.crrAt(name)
	return known
}

// crr is the remembered CRR of that name (the zero CRR if none).
func (m *podMemory) crr(name string) decision.CRR {
	if i, ok := m.crrAt(name); ok {
		return m.crrs[i]
	}
	return decision.CRR{}
}

// liveCRRSeen remembers a CRR read live: seen, and no longer taken for one
// this controller deleted, or whose create was refused.
func (m *podMemory) liveCRRSeen(c decision.CRR) {
	m.seeCRR(c)
	if m.rare == nil {
		return
	}
	delete(m.rare.deletedCRRs, c.Name)
	// A refused create of it (one that got no answer) was applied after all.
	delete(m.rare.refusedCRRs, c.Name)
	if r, ok := m.rare.refused[decision.ActionCreateCRR]; ok && r.CRRName == c.Name {
		delete(m.rare.refused, decision.ActionCreateCRR)
	}
}

// refusedCRRList is the CRR creates of this controller that were refused,
// by name, for the decision (decision.Input.RefusedCRRs).
func (m *podMemory) refusedCRRList() []decision.Action {
	var out []decision.Action
	refused := m.seldom().refusedCRRs
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		out = append(out, refused[name])
	}
	return out
}

// swapTimes is when each sidecar was swapped, for the decision (nil when none was).
func (m *podMemory) swapTimes() map[string]time.Time {
	if len(m.swappedAt) == 0 {
		return nil
	}
	out := make(map[string]time.Time, len(m.swappedAt))
	for _, s := range m.swappedAt {
		out[s.container] = s.at
	}
	return out
}

// firstWarning reports whether this Warning (reason and message) is new
// for the pod, and remembers it.
func (m *podMemory) firstWarning(key string) bool {
	if m.seldom().warned[key] {
		return false
	}
	r := m.rarely()
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	r.warned[key] = true
	return true
}

// firstFailedKill reports whether the container's failed kill is new for
// the pod, and remembers it.
func (m *podMemory) firstFailedKill(container string) bool {
	if m.seldom().failed[container] {
		return false
	}
	r := m.rarely()
	if r.failed == nil {
		r.failed = map[string]bool{}
	}
	r.failed[container] = true
	return true
}

// waiting records when the pod's wait began (zero: it does not wait);
// waitingSinceTime reads it.
func (m *podMemory) waiting(since time.Time)     { m.waitingSince = since }
func (m *podMemory) waitingSinceTime() time.Time { return m.waitingSince }

// lookedForSecondAny reports whether kruise's CRR was looked for for any
// of why; lookForSecond records a look for why, secondLooks the looks made.
func (m *podMemory) lookedForSecondAny(why int) bool { return int(m.secondLooked)&why != 0 }
func (m *podMemory) lookForSecond(why int)           { m.secondLooked |= uint32(why) }
func (m *podMemory) secondLooks() int                { return int(m.secondLooked) &^ awaited }

// secondTerminator is OpenKruise's SidecarTerminator's CRR for the pod, once
// found (nil until then); secondFound remembers it.
func (m *podMemory) secondTerminator() *decision.SecondTerminator { return m.seldom().second }
func (m *podMemory) secondFound(st *decision.SecondTerminator)    { m.rarely().second = st }

// secondWasNoted reports whether the second terminator was noted in the
// pod's log and metric; noteSecond remembers that it was.
func (m *podMemory) secondWasNoted() bool { return m.secondNoted }
func (m *podMemory) noteSecond()          { m.secondNoted = true }

// readJob remembers the pod's owning Job as read live; job returns it (nil
// until read). The Job's podFailurePolicy cannot change once the Job exists
// (the API refuses the update), so one read serves every later sync.
func (m *podMemory) readJob(f *decision.JobFacts) { m.jobFacts = f }
func (m *podMemory) job() *decision.JobFacts      { return m.jobFacts }

// expectEcho notes a write about to be sent whose echo the handlers are to
// drop (burst), unless one is noted already: a second write before the
// first's echo, like a write whose echo's sync has work (not burst), drops
// the note, and the pod's next update goes to a sync.
func (m *podMemory) expectEcho(a decision.Action, burst bool) {
	if m.echo != nil || !burst {
		m.echo = nil
		return
	}
	m.echo = &echoNote{kind: a.Kind, crrName: a.CRRName, swaps: a.Swaps}
}

// echoNoted is the write whose echo is to be dropped, if one is noted.
func (m *podMemory) echoNoted() (decision.Action, bool) {
	if m.echo == nil {
		return decision.Action{}, false
	}
	return decision.Action{Kind: m.echo.kind, CRRName: m.echo.crrName, Swaps: m.echo.swaps}, true
}

// echoSeen drops the note: its echo was seen, or the write failed or made
// nothing new.
func (m *podMemory) echoSeen() { m.echo = nil }
