package decision

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// What a plan assumes and the input cannot vouch for. The input is the
// caches and the reconciler's memory; both can miss a write another replica
// made a moment ago (the pod and CRR informers are separate watches, and a
// new leader remembers nothing), and a write of this controller's that got
// no answer. A plan that creates a CRR or swaps an image assumes no stop of
// the same sidecars is under way; where that rests on the absence of an
// object the input would not show, Confirm names it, the reconciler reads it
// live in one step (reconciler.confirm), and Decide runs once more on the
// input with what was found (Input.ReadLive, PodLive, Job, SecondTerminator),
// which asks for none of it again. The happy path names nothing.

// Confirm is what a plan asks to read live before any of its writes.
type Confirm struct {
	// CRRs are our CRRs that may exist although the input has them not, or
	// only as remembered.
	CRRs []ConfirmCRR
	// Pod: the plan corrects an earlier kill (FailedKills), judged on the
	// cached pod, whose sidecar may have stopped since.
	Pod bool
	// Job names the pod's owning Job when the plan needs its
	// podFailurePolicy (Plan.NeedsJob) and the input has it not.
	Job string
	// SecondTerminator: why to look for OpenKruise's SidecarTerminator's CRR
	// of the pod (0: no need).
	SecondTerminator SecondLook
}

// Empty reports whether the plan asks for no live read.
func (c Confirm) Empty() bool {
	return len(c.CRRs) == 0 && !c.Pod && c.Job == "" && c.SecondTerminator == 0
}

// ConfirmCRR is one CRR to read: the create that would have made it, and a
// time it must have been made after to count (zero: any time), for a name a
// CRR already had that the input remembers as gone or finished.
type ConfirmCRR struct {
	Create    Action
	MadeAfter time.Time
}

// SecondLook is why OpenKruise's own SidecarTerminator's CRR is looked for;
// a pod is looked at at most once for each (Input.SecondLooked).
type SecondLook int

const (
	// SecondLookPending: one of our CRRs waits behind another of the pod.
	SecondLookPending SecondLook = 1 << iota
	// SecondLookWait: kruise's terminator was seen; a first CRR waits for its CRR.
	SecondLookWait
	// SecondLookWaitEnd: that wait is over, whatever the plan now.
	SecondLookWaitEnd
	// SecondLookCreate: kruise's terminator was seen; a first CRR is due.
	SecondLookCreate
)

// confirmations is the rule: for each write of the plan, the objects whose
// absence it rests on and the input cannot vouch for.
func confirmations(in Input, p Plan) Confirm {
	var c Confirm
	if in.Pod == nil {
		return c
	}
	c.SecondTerminator = secondLook(in, p)
	if p.NeedsJob != "" && in.Job == nil {
		c.Job = p.NeedsJob
	}
	known := func(name string) (CRR, bool) {
		for _, k := range in.CRRs {
			if k.Name == name {
				return k, true
			}
		}
		return CRR{}, false
	}
	seen := map[string]bool{}
	for _, name := range in.ReadLive {
		seen[name] = true
	}
	add := func(a Action, after time.Time) {
		if !seen[a.CRRName] {
			seen[a.CRRName] = true
			c.CRRs = append(c.CRRs, ConfirmCRR{Create: a, MadeAfter: after})
		}
	}
	addUnknown := func(a Action) {
		if _, ok := known(a.CRRName); !ok && in.CRRAPI {
			add(a, time.Time{})
		}
	}
	for _, w := range in.Overdue {
		// A write of ours the cache has not shown in time: in effect (the
		// cache lags) or not (undone, or never listed), the API server says.
		switch w.Kind {
		case ActionCreateCRR:
			add(w, time.Time{})
		case ActionDeleteCRR:
			add(Action{Kind: ActionCreateCRR, CRRName: w.CRRName, Stage: w.Stage, Containers: w.Containers}, time.Time{})
		default:
			c.Pod = c.Pod || !in.PodLive
		}
	}
	if len(p.Actions) == 0 {
		return c
	}
	// A correction (a second CRR, a swap after a failed kill) judged on a
	// cached pod that may be older than the sidecar's stop.
	c.Pod = c.Pod || (len(p.FailedKills) > 0 && !in.PodLive)
	// A stop on a pod whose phase we settled rests on the settle standing.
	// The kubelet's status manager may have written its own phase (Running)
	// back over it (mergePodStatus in pkg/kubelet/status/status_manager.go
	// keeps the kubelet's phase unless it turns terminal, and the API server
	// lets a status leave a terminal phase), and a cache that lags or a new
	// leader's list may not show that yet. A sidecar stopped then ends with
	// the stop's exit, and the kubelet reads the phase from it (getPhase in
	// pkg/kubelet/kubelet_pods.go: Failed for a Never pod), so the live
	// phase decides (soak seed 1086 with the measured write cost).
	c.Pod = c.Pod || (stopsSettledPod(in.Pod, p) && !in.PodLive)
	for _, a := range p.Actions {
		switch a.Kind {
		case ActionSwapImage:
			// A swap after a refused create of this stage or an earlier
			// one: another replica may have made that CRR since (soak seed
			// 460), and its stop would be under way.
			for _, r := range in.RefusedCRRs {
				if r.Stage <= a.Stage {
					addUnknown(r)
				}
			}
		case ActionCreateCRR:
			if r := crrRefusal(in.Refusals, ActionCreateCRR, a.CRRName); r != nil && r.MaybeApplied {
				// Its own create got no answer before: it may have been
				// applied, and the cache not show it yet.
				add(a, time.Time{})
			}
			if a.Attempt >= 2 {
				prev := a
				prev.Attempt, prev.CRRName = a.Attempt-1, StageCRRName(in.Pod, a.Stage, a.Attempt-1)
				switch k, ok := known(prev.CRRName); {
				case !ok:
					// The attempt before, made by another replica or
					// before a restart, not yet in the cache.
					add(prev, time.Time{})
				case k.Unseen:
					// Known from memory only (our label stripped, or
					// deleted after it finished): another replica whose
					// view had neither it nor the attempt record may have
					// made attempt 1 again under the name (soak seed 1061).
					add(prev, k.Created)
				}
			}
			// The earlier stages' CRRs the pod's own marks say may exist
			// (soak seed 140), or, for a memory that did not watch the
			// stop from its start, any earlier stage's (soak seed 1061: a
			// new leader whose CRR informer lags its pod informer sees an
			// earlier stage's sidecars stopped and not the CRR that stops
			// them, still in flight).
			for _, e := range earlierStageCRRs(in.Pod, a.Stage, !watchedFromStart(in, p)) {
				if e.Stage > 0 || unnamedSidecars(p) {
					addUnknown(e)
				}
			}
			// The next stage's, which a replica that found this stage held
			// up made (soak seed 313): that replica deleted this stage's
			// CRR, which this one never saw. A memory that watched the pod
			// since before its mains were done saw this stage's CRR, in the
			// cache or as its own write, and remembers it: it would not be
			// making it now. So only a memory that began later (a restart,
			// a new leader) asks, and the happy path reads nothing.
			if next, ok := laterStageCRR(in.Pod, a.Stage); ok && !watchedFromStart(in, p) {
				addUnknown(next)
			}
			for _, k := range in.CRRs {
				if !k.Deleted || k.Stage >= a.Stage || !in.CRRAPI {
					continue
				}
				switch {
				case crrRefusal(in.Refusals, ActionDeleteCRR, k.Name) != nil:
					// Its delete got no answer and may not have been
					// applied: the CRR itself may stand (soak seed 376).
					add(Action{Kind: ActionCreateCRR, CRRName: k.Name, Attempt: k.Attempt, Stage: k.Stage, Containers: k.Containers}, time.Time{})
				case !allTerminated(p, k.Containers):
					// A held-up stage's CRR this controller deleted when its
					// window closed, with its sidecars still running: another
					// replica that sees them running may have made it again
					// since. One whose sidecars all stopped is made again by
					// no one who sees them stopped, and would stop nothing.
					add(Action{Kind: ActionCreateCRR, CRRName: k.Name, Attempt: k.Attempt, Stage: k.Stage, Containers: k.Containers}, k.Created)
				}
			}
			for _, r := range in.RefusedCRRs {
				// An earlier stage's CRR whose create was refused here and
				// another replica made since (soak seed 403).
				if r.Stage < a.Stage {
					addUnknown(r)
				}
			}
		}
	}
	return c
}

// stopsSettledPod reports whether the plan stops a sidecar of a pod whose
// phase is terminal: one this controller settled (eligible admits no other).
func stopsSettledPod(pod *corev1.Pod, p Plan) bool {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, a := range p.Actions {
		if a.Kind == ActionCreateCRR || a.Kind == ActionSwapImage {
			return true
		}
	}
	return false
}

// secondLook is why the plan looks for kruise's SidecarTerminator's CRR.
func secondLook(in Input, p Plan) SecondLook {
	if !in.CRRAPI || in.SecondTerminator != nil {
		return 0
	}
	var why SecondLook
	switch {
	case SuspectSecondTerminator(in):
		why = SecondLookPending
	case p.AwaitsSecondTerminator:
		// Kruise makes its CRR the moment it sees the mains done: looking
		// now finds it before it has stopped anything. Once more when the
		// wait is over: its kill may be over by then, but it is said.
		why = SecondLookWait
	case in.SecondTerminatorAwaited:
		why = SecondLookWaitEnd
	case in.KruiseTerminatorSeen && createsFirstCRR(p):
		why = SecondLookCreate
	}
	if in.SecondLooked&why != 0 {
		return 0
	}
	return why
}

func createsFirstCRR(p Plan) bool {
	for _, a := range p.Actions {
		if a.Kind == ActionCreateCRR && a.Attempt == 1 {
			return true
		}
	}
	return false
}

// earlierStageCRRs are the CRRs the stages before stage may have in flight
// by the pod's own record (every stage before it when all): each stage up to
// the one its stop-stage mark says was issued, and the stage its attempt
// record names, at the attempt recorded for it (the first when none is). A
// replica whose CRR informer lags its pod informer sees the marks another
// replica wrote a moment ago, and not that replica's CRR.
func earlierStageCRRs(pod *corev1.Pod, stage int, all bool) []Action {
	mark, _ := stageMark(pod)
	var out []Action
	for s := 0; s < stage; s++ {
		recorded := recordedAttempts(pod, s)
		if !all && s > mark && recorded == 0 {
			continue
		}
		attempt := max(recorded, 1)
		out = append(out, Action{Kind: ActionCreateCRR, CRRName: StageCRRName(pod, s, attempt), Attempt: attempt, Stage: s})
	}
	return out
}

// laterStageCRR is the CRR of the stage after stage, at the attempt recorded
// for it (the first when none is), when the pod's stop order names a stage
// after it (stage 0, the sidecars the order does not name, comes before the
// order's first). A replica that found stage held up deleted stage's CRR and
// made the next stage's, the held-up sidecars carried into it; another
// replica whose caches show neither write yet would make stage's CRR again
// beside it.
func laterStageCRR(pod *corev1.Pod, stage int) (Action, bool) {
	if stage < 0 || namedStages(pod) <= stage {
		return Action{}, false
	}
	next := stage + 1
	attempt := max(recordedAttempts(pod, next), 1)
	return Action{Kind: ActionCreateCRR, CRRName: StageCRRName(pod, next, attempt), Attempt: attempt, Stage: next}, true
}

// namedStages counts the names in the pod's stop-order annotation: the
// stages it asks for, at most (stopOrder says whether the order is usable).
func namedStages(pod *corev1.Pod) int {
	n := 0
	for range orderNames(pod.Annotations[AnnotationStopOrder]) {
		n++
	}
	return n
}

// crrRefusal is the remembered refusal of that kind of write of the named CRR.
func crrRefusal(refusals []Refusal, kind ActionKind, name string) *Refusal {
	for i := range refusals {
		if refusals[i].Kind == kind && refusals[i].CRRName == name {
			return &refusals[i]
		}
	}
	return nil
}

// watchedFromStart reports whether the reconciler's memory of the pod began
// before its mains were done: before any stop of its sidecars was made.
func watchedFromStart(in Input, p Plan) bool {
	return !in.WatchedSince.IsZero() && !p.MainsDoneAt.IsZero() && in.WatchedSince.Before(p.MainsDoneAt)
}

// allTerminated reports whether every named container has terminated, as
// the plan classified them.
func allTerminated(p Plan, names []string) bool {
	for _, n := range names {
		for _, c := range p.Containers {
			if c.Name == n && c.State != StateTerminated {
				return false
			}
		}
	}
	return true
}

// unnamedSidecars reports whether the pod has sidecars its stop order does
// not name: stage 0, which has a CRR only then.
func unnamedSidecars(p Plan) bool {
	if p.Stage == nil {
		return true
	}
	for _, c := range p.Containers {
		if c.Role == RoleSidecar && !c.IgnoreExitCode && !contains(p.Stage.Order, c.Name) {
			return true
		}
	}
	return false
}
