package decision

import (
	"fmt"
	"strings"
	"time"
)

// Waits used when nothing in the pod will change on its own to wake us.
const (
	nodeMissingRequeue = 30 * time.Second
	waitingRequeue     = 10 * time.Second
)

// kill plans how to stop the target sidecars (none terminated) of a pod
// whose main containers are done, following through on earlier CRRs.
func (p Plan) kill(in Input, targets []Container) Plan {
	if !in.Node.Found {
		p.Problems = append(p.Problems, Problem{Reason: ReasonNodeNotFound,
			Message: fmt.Sprintf("node %q is not known, so its kind (normal or virtual) is not either; no sidecar is stopped", in.Node.Name)})
		p.RequeueAfter = nodeMissingRequeue
		return p.with(VerdictNoPath, "the pod's node is not known")
	}
	latest := latestCRR(in.CRRs)
	if n, began := attemptRecord(in.Pod, in.stage); n > 0 && (latest == nil || latest.Attempt < n) {
		// The CRRs are gone (their TTL, or someone deleted them) but the pod
		// records that attempt n began: count from it, never from one, and
		// keep its window, as last seen, for every sidecar it may stop. A
		// record without a time (written by an earlier version) reads as
		// finished long ago.
		latest = &CRR{Name: fmt.Sprintf("ContainerRecreateRequest attempt %d (deleted since)", n), Attempt: n, Stage: in.stage,
			Containers: names(targets), Created: began, Unseen: true}
		if began.IsZero() {
			latest.Phase = "Completed"
		}
	}
	var deadline time.Time
	inFlight := false
	if latest != nil {
		deadline = latest.deadlineAt(in)
		inFlight = !latest.Finished() && in.Now.Before(deadline)
	}

	caps := in.Node.Capabilities()
	var byCRR []Container
	var bySwap, byJobSwap []Swap
	var waiting, noPath []string
	apiGoneWait := false // a swap waits for stops under CRRs whose API went away
	yielded, yieldUntil := p.yieldToSecondTerminator(in)
	for _, c := range targets {
		if img := c.SwappedTo(); img != "" {
			waiting = append(waiting, p.followSwap(in, c, img, swapNotBefore(p.MainsDoneAt, latest, deadline)))
			continue
		}
		if yielded[c.Name] {
			waiting = append(waiting, fmt.Sprintf("%q is being stopped by OpenKruise's SidecarTerminator (%s)", c.Name, in.SecondTerminator.CRR))
			p.requeue(yieldUntil.Sub(in.Now) + time.Second)
			continue
		}
		targeted := latest != nil && contains(latest.Containers, c.Name)
		if targeted && inFlight && !cameBack(c, *latest) {
			waiting = append(waiting, fmt.Sprintf("%q is being stopped by %s", c.Name, latest.Name))
			p.requeue(deadline.Sub(in.Now) + time.Second)
			continue
		}
		if until, ok := stopUnderWay(in, latest, c.Name, deadline); ok && targeted && !inFlight && !cameBack(c, *latest) {
			waiting = append(waiting, fmt.Sprintf("%q may still be stopping: kruise-daemon began stopping it under %s, and the pod's grace period for that runs until %s",
				c.Name, latest.Name, until.UTC().Format(time.RFC3339)))
			p.requeue(until.Sub(in.Now))
			continue
		}
		// A refused CRR is a failed kill as much as one that ran out.
		refusedCRR := refusedCRRFor(in, c.Name)
		failed := targeted || everTargeted(in.CRRs, c.Name) || refusedCRR != nil
		if failed {
			p.FailedKills = append(p.FailedKills, c.Name)
			if refusedCRR != nil {
				p.Problems = append(p.Problems, refusedKill(refusedCRR, c.Name))
			} else {
				p.Problems = append(p.Problems, Problem{Reason: ReasonSidecarKillFailed, Message: fmt.Sprintf(
					"container %q still %s after %s ended or passed its deadline", c.Name, c.State, latest.Name)})
			}
		}
		// Where a CRR is the way, an image is only the Job's verdict's to
		// use (jobsettle.go), and a refused swap leaves the CRR: no wait.
		crrWay := !failed && caps.KruiseDaemon && in.Node.Daemon != DaemonAbsent && c.State == StateRunning && c.KillByCRR && in.CRRAPI
		var image string
		var wait time.Duration
		if !crrWay {
			image, wait = p.swapAfterRefusal(in, c)
		}
		if wait > 0 {
			waiting = append(waiting, fmt.Sprintf("the image swap of %q is retried in %s, after it was refused", c.Name, wait.Round(time.Second)))
			continue
		}
		if until, ok := stopsAfterCRD(in, c); ok && image != "" {
			waiting = append(waiting, fmt.Sprintf("the image swap of %q waits until %s: the ContainerRecreateRequest API went away at %s, and kruise-daemon, which serves node %q, may still be stopping it under a CRR made before",
				c.Name, until.UTC().Format(time.RFC3339), crrAPIGoneSince(in).UTC().Format(time.RFC3339), in.Node.Name))
			p.requeue(until.Sub(in.Now))
			apiGoneWait = true
			continue
		}
		// image may be the operator's default (c.DefaultImage): the cases
		// that swap before the CRR case are those without a CRR path.
		swap := Swap{Index: c.Index, Container: c.Name, From: c.Image, To: image}
		switch {
		case !caps.KruiseDaemon:
			// The platform never runs kruise-daemon (platform.go): no CRR,
			// no wait for the daemon signal; the swap at once.
			if image == "" {
				noPath = append(noPath, fmt.Sprintf("container %q is on %s node %q, which can run no kruise-daemon, and has no usable quick-exit image", c.Name, in.Node.platform(), in.Node.Name))
				continue
			}
			bySwap = append(bySwap, swap)
		case in.Node.Daemon == DaemonAbsent:
			// Like a virtual node: a CRR would wait for its deadline there.
			if image == "" {
				noPath = append(noPath, fmt.Sprintf("container %q is on node %q, where no kruise-daemon runs (%s), and has no usable quick-exit image", c.Name, in.Node.Name, in.Node.DaemonWhy))
				continue
			}
			bySwap = append(bySwap, swap)
		case c.State != StateRunning:
			// A ContainerRecreateRequest stops a running container; one that
			// never started (or waits to restart) has nothing to stop.
			if image == "" {
				noPath = append(noPath, fmt.Sprintf("container %q is %s, not running, so a ContainerRecreateRequest cannot stop it, and it has no usable quick-exit image", c.Name, c.State))
				p.requeue(waitingRequeue)
				continue
			}
			bySwap = append(bySwap, swap)
		case failed && image != "":
			bySwap = append(bySwap, swap)
		case c.KillByCRR && in.CRRAPI:
			if change, ok := jobReadsCRR(in, p.Containers, c); ok {
				if img, why := jobSwap(in, c); why == "" {
					// The Job's podFailurePolicy could read the CRR's exit;
					// the quick-exit image's exit 0 it never reads.
					swap.To = img
					byJobSwap = append(byJobSwap, swap)
					if p.JobVerdict == nil {
						p.JobVerdict = &change
					}
					break
				}
			}
			byCRR = append(byCRR, c)
		case image != "":
			bySwap = append(bySwap, swap)
		case c.KillByCRR:
			noPath = append(noPath, fmt.Sprintf("container %q needs a ContainerRecreateRequest, but that API (OpenKruise) is not installed, and it has no usable quick-exit image", c.Name))
		default:
			noPath = append(noPath, fmt.Sprintf("container %q has no usable quick-exit image", c.Name))
		}
	}

	if wait, ok := waitForSecondTerminator(in, p.MainsDoneAt, latest, byCRR); ok {
		p.requeue(wait)
		waiting = append(waiting, fmt.Sprintf("the ContainerRecreateRequest for %v waits %s: OpenKruise's SidecarTerminator acts in this cluster, and its CRR is looked for first", names(byCRR), wait.Round(time.Second)))
		byCRR, p.AwaitsSecondTerminator = nil, true
	}
	var record []Action
	if apiGoneWait {
		if a, ok := recordAPIGone(in); ok {
			record = append(record, a)
		}
	}
	if len(byCRR) > 0 {
		planned := len(p.Actions)
		waiting, noPath = p.planCRR(in, latest, inFlight, deadline, byCRR, waiting, noPath)
		switch {
		case len(p.Actions) > planned && p.Actions[len(p.Actions)-1].Attempt > 1:
			// A retry is recorded once its create succeeded (the reconciler
			// stops at a refused action): a refused create claims nothing.
			made := p.Actions[len(p.Actions)-1]
			if a, ok := recordAttempt(in, in.stage, made.Attempt, time.Time{}); ok {
				record = append(record, a)
			}
		case len(p.Actions) == planned && latest != nil && !latest.Created.IsZero() && !inFlight:
			// A CRR failed and the retry waits (its backoff, a refusal) or
			// was given up: the attempt is recorded now, so that the count
			// outlives the CRR.
			if a, ok := recordAttempt(in, in.stage, latest.Attempt, latest.Created); ok {
				record = append(record, a)
			}
		}
	}
	if len(bySwap) > 0 {
		a := Action{Kind: ActionSwapImage, Swaps: bySwap}
		for _, sw := range bySwap {
			a.Containers = append(a.Containers, sw.Container)
		}
		p.Actions = append(p.Actions, a)
	}
	if len(byJobSwap) > 0 {
		a := Action{Kind: ActionSwapImage, Swaps: byJobSwap, JobRule: p.JobVerdict.String()}
		for _, sw := range byJobSwap {
			a.Containers = append(a.Containers, sw.Container)
		}
		p.Actions = append(p.Actions, a)
	}
	for _, msg := range noPath {
		p.Problems = append(p.Problems, Problem{Reason: ReasonNoTerminationPath, Message: msg})
	}

	switch {
	case len(p.Actions) > 0:
		p = p.with(VerdictAct, "the main containers are done: "+describeActions(p.Actions))
	case len(waiting) > 0:
		p = p.with(VerdictInProgress, strings.Join(waiting, "; "))
	default:
		p = p.with(VerdictNoPath, strings.Join(noPath, "; "))
	}
	// The record is bookkeeping, not a stop: it leaves the verdict as it is.
	p.Actions = append(p.Actions, record...)
	return p
}

// planCRR adds the next CRR for the given sidecars, unless one is still in
// flight (one CRR per pod at a time), the retry backoff has not passed, or the
// attempts are used up.
func (p *Plan) planCRR(in Input, latest *CRR, inFlight bool, deadline time.Time, cs []Container, waiting, noPath []string) ([]string, []string) {
	if inFlight {
		p.requeue(deadline.Sub(in.Now) + time.Second)
		return append(waiting, fmt.Sprintf("%s is still in flight; %v wait for it", latest.Name, names(cs))), noPath
	}
	attempt := 1
	if latest != nil {
		attempt = latest.Attempt + 1
		if attempt > in.Policy.MaxCRRAttempts {
			p.Problems = append(p.Problems, Problem{Reason: ReasonSidecarKillGaveUp, Message: fmt.Sprintf(
				"containers %v still run after %d ContainerRecreateRequests; giving up (set a quick-exit image to let the controller swap it)", names(cs), latest.Attempt)})
			return waiting, append(noPath, fmt.Sprintf("containers %v: ContainerRecreateRequest attempts used up", names(cs)))
		}
		failedAt := latest.Completed
		if failedAt.IsZero() {
			failedAt = deadline
			if latest.Finished() {
				failedAt = latest.Created
			}
		}
		if notBefore := failedAt.Add(in.Policy.RetryBackoff << (latest.Attempt - 1)); in.Now.Before(notBefore) {
			p.requeue(notBefore.Sub(in.Now))
			return append(waiting, fmt.Sprintf("retry %d for %v after backoff", attempt, names(cs))), noPath
		}
	}
	// The create of this very attempt was refused: it was never made, so it
	// keeps its number; the refusal sets when it is sent again, if ever.
	if r := latestRefusal(in.Refusals, ActionCreateCRR, ""); r != nil && r.Attempt == attempt {
		wait, gaveUp := refusalWait(r, in.Policy, in.Now)
		if gaveUp {
			p.Problems = append(p.Problems, Problem{Reason: ReasonSidecarKillGaveUp, Message: fmt.Sprintf(
				"containers %v still run: the ContainerRecreateRequest was refused %d times (last: %s); giving up (set a quick-exit image to let the controller swap it)",
				names(cs), r.Count, r.Describe())})
			return waiting, append(noPath, fmt.Sprintf("containers %v: ContainerRecreateRequest refused", names(cs)))
		}
		if wait > 0 {
			p.requeue(wait)
			return append(waiting, fmt.Sprintf("ContainerRecreateRequest attempt %d for %v is sent again in %s, after it was refused", attempt, names(cs), wait.Round(time.Second))), noPath
		}
	}
	p.Actions = append(p.Actions, Action{Kind: ActionCreateCRR, Containers: names(cs),
		CRRName: StageCRRName(in.Pod, in.stage, attempt), Attempt: attempt, Stage: in.stage, ReadPodFirst: !JobOwned(in.Pod)})
	return waiting, noPath
}

// cameBack reports whether a container targeted by a CRR was restarted since
// (OnFailure restarts a sidecar that exits non-zero on SIGTERM) and runs again.
func cameBack(c Container, crr CRR) bool {
	rc, ok := crr.RestartCounts[c.Name]
	return ok && c.RestartCount > rc && c.State == StateRunning
}

func everTargeted(crrs []CRR, container string) bool {
	for _, c := range crrs {
		if contains(c.Containers, container) {
			return true
		}
	}
	return false
}

func latestCRR(crrs []CRR) *CRR {
	var latest *CRR
	for i := range crrs {
		if latest == nil || crrs[i].Attempt > latest.Attempt {
			latest = &crrs[i]
		}
	}
	return latest
}

func (p *Plan) requeue(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if p.RequeueAfter == 0 || d < p.RequeueAfter {
		p.RequeueAfter = d
	}
}

func describeActions(actions []Action) string {
	parts := make([]string, len(actions))
	for i, a := range actions {
		switch a.Kind {
		case ActionCreateCRR:
			parts[i] = fmt.Sprintf("ContainerRecreateRequest %s (attempt %d) stops %v", a.CRRName, a.Attempt, a.Containers)
		case ActionSwapImage:
			if a.JobRule != "" {
				parts[i] = fmt.Sprintf("image swap stops %v, not a ContainerRecreateRequest, whose exit code the Job's podFailurePolicy could read", a.Containers)
				break
			}
			parts[i] = fmt.Sprintf("image swap stops %v", a.Containers)
		case ActionDeleteCRR:
			parts[i] = fmt.Sprintf("ContainerRecreateRequest %s of stop-order stage %d is deleted, so kruise-daemon takes up the next stage's", a.CRRName, a.Stage)
		case ActionRecordAttempt:
			parts[i] = fmt.Sprintf("attempt %d of stage %d is recorded on the pod", a.Attempt, a.Stage)
		case ActionRecordAPIGone:
			parts[i] = "when the ContainerRecreateRequest API went away is recorded on the pod"

		case ActionSettlePhase:
			if a.JobRule != "" {
				parts[i] = fmt.Sprintf("phase settled to %s from the main containers before sidecars %v are stopped", a.Phase, a.Containers)
				break
			}
			if a.LeftRunning {
				parts[i] = fmt.Sprintf("phase settled to %s from the main containers; sidecars %v run on until the pod is deleted", a.Phase, a.Containers)
				break
			}
			parts[i] = fmt.Sprintf("phase settled to %s before stopping ignore-exit-code sidecars %v", a.Phase, a.Containers)
		}
	}
	return strings.Join(parts, "; ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
