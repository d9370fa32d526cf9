package decision

import (
	"fmt"
	"iter"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// stageMargin is added to the pod's termination grace period to bound how
// long one stage of a stop order may hold up the next: a stopped container
// gets SIGKILL once the grace period is over, so a sidecar still running
// after it (and a margin for the node to report it) will not stop on its own.
const stageMargin = 10 * time.Second

// StageStatus is where a pod is in its stop order.
type StageStatus struct {
	Order []string // the annotation's names, first stopped first
	// Stage is the current stage: 0 for the sidecars the order does not
	// name, i for Order[i-1].
	Stage int
	Last  int // the last stage (len(Order))
	// Stopping are the sidecars of the current stage (and of earlier stages
	// that held the order up) not yet terminated.
	Stopping []string
	// Next are the sidecars of the later stages, which wait.
	Next []string
	// Until is when the current stage stops holding up the next one even if
	// its sidecars still run; zero until its kill is issued.
	Until time.Time
	// HeldUp names the sidecars of earlier stages that were still running
	// when their bound passed.
	HeldUp []string
}

// killInOrder stops the sidecars stage by stage when the pod asks for an
// order, and all at once (kill) otherwise. sidecars are all of the pod's,
// regular those to stop now (not terminated, not ignore-exit-code).
func (p Plan) killInOrder(in Input, sidecars, regular []Container) Plan {
	order, bad := stopOrder(in.Pod, p.Containers)
	if bad != nil {
		p.Problems = append(p.Problems, *bad)
	}
	if order == nil {
		return p.kill(in, regular)
	}
	stageOf := map[string]int{}
	for i, n := range order {
		stageOf[n] = i + 1
	}
	alive := make([][]Container, len(order)+1)
	finished := make([]time.Time, len(order)+1) // when each stage's last sidecar terminated
	lastAlive := -1
	for _, s := range sidecars {
		st := stageOf[s.Name]
		switch {
		case s.IgnoreExitCode:
		case contains(names(regular), s.Name):
			alive[st] = append(alive[st], s)
			lastAlive = max(lastAlive, st)
		case s.State == StateTerminated && s.FinishedAt.After(finished[st]):
			finished[st] = s.FinishedAt
		}
	}
	markStage, markAt := stageMark(in.Pod)
	bound := podGrace(in.Pod) + stageMargin

	// The furthest stage whose kill was issued: the stages before it had
	// their turn. A sidecar of theirs that still runs (or came back) is
	// stopped with the current stage and never sends the order back: the
	// CRRs that showed their turn may have been deleted.
	reached := markStage
	for _, c := range in.CRRs {
		reached = max(reached, c.Stage)
	}
	reached = min(reached, len(order))
	if lastAlive >= 0 && lastAlive < reached {
		// Every sidecar still running belongs to a stage whose turn is over:
		// the furthest stage issued stays the current one and follows them
		// through. Going back to a late sidecar's own stage would make that
		// stage's CRR again while the current stage's is in flight, and a pod
		// has one of our CRRs in flight at a time (kruise-daemon works on one
		// of a pod's CRRs at a time, and the clock of the one that waits runs).
		lastAlive = reached
	}
	status := &StageStatus{Order: order, Last: len(order)}
	start := p.MainsDoneAt // when the stage's turn came
	var targets []Container
	for s := 0; s <= len(order); s++ {
		if s < reached && s < lastAlive {
			targets = append(targets, alive[s]...)
			if finished[s].After(start) {
				start = finished[s]
			}
			continue
		}
		if len(alive[s]) == 0 && s != lastAlive {
			if finished[s].After(start) {
				start = finished[s]
			}
			continue
		}
		targets = append(targets, alive[s]...)
		status.Stage = s
		issued := stageIssuedAt(s, in.CRRs, markStage, markAt)
		if issued.IsZero() || s == lastAlive {
			// Not stopped yet (the bound counts from the kill, so a slow or
			// restarted controller never skips a stage), or nothing after it
			// waits: kill's own follow-through handles a sidecar that stays.
			break
		}
		// A stage issued by CRR holds the next one up until its CRRs' stop
		// windows close as well: kruise-daemon may take a CRR up late, and
		// its stop then drains for the grace period from there. The next
		// stage's CRR, which stops the held-up sidecars too, would stop
		// them a second time inside it.
		until := later(later(start, issued).Add(bound), stageWindowEnd(in, s))
		if in.Now.Before(until) {
			status.Until = until
			p.requeue(until.Sub(in.Now))
			break
		}
		// The bound passed: say which sidecar held the order up, and go on
		// with the next stage, still stopping the late ones with it.
		status.HeldUp = append(status.HeldUp, names(alive[s])...)
		p.Problems = append(p.Problems, Problem{Reason: ReasonStopOrderHeldUp, Message: fmt.Sprintf(
			"sidecars %v of stop-order stage %d still run %s after they were stopped (grace period plus %s, or the stop window of the stage's ContainerRecreateRequests); the later stages are stopped now",
			names(alive[s]), s, until.Sub(later(start, issued)), stageMargin)})
		start = until
	}
	for s := status.Stage + 1; s <= len(order); s++ {
		status.Next = append(status.Next, names(alive[s])...)
	}
	status.Stopping = names(targets)
	p.Stage = status

	stageIn := in
	stageIn.stage = status.Stage
	stageIn.CRRs, stageIn.Refusals = nil, nil
	for _, c := range in.CRRs {
		if c.Stage == status.Stage {
			stageIn.CRRs = append(stageIn.CRRs, c)
		}
	}
	// A refused CRR of an earlier stage is no refusal of this stage's.
	for _, r := range in.Refusals {
		if r.Kind != ActionCreateCRR || overlaps(r.Containers, names(targets)) {
			stageIn.Refusals = append(stageIn.Refusals, r)
		}
	}
	p = p.kill(stageIn, targets).stageActions(in, status.Stage, markStage, markAt)
	if len(status.Next) > 0 {
		p.Reason += fmt.Sprintf("; stop order: stage %d of %d, %v wait for %v", status.Stage, status.Last, status.Next, status.Stopping)
	}
	return p
}

// stageActions marks the stage's swaps with when the stage began, and puts
// the deletion of earlier stages' unfinished CRRs before its own CRR:
// kruise-daemon takes up one CRR of a pod at a time, the oldest first
// (pickRecreateRequest in pkg/daemon/containerrecreate/crr_daemon_controller.go,
// kruise v1.9.1), and under restartPolicy Never a CRR whose container exited
// stays Recreating (crr_daemon_util.go: an exited container is "recreated
// soon"), so the next stage's CRR would wait for the earlier one's deadline.
// The reconciler sends the actions in order and stops at a refused one, so
// the stage's CRR is never created beside an earlier one still in flight.
func (p Plan) stageActions(in Input, stage, markStage int, markAt time.Time) Plan {
	var out, record []Action
	var held []string
	heldCreate := 0
	for _, a := range p.Actions {
		switch a.Kind {
		case ActionRecordAttempt:
			if a.Attempt == heldCreate && a.Began.IsZero() {
				// The record of a create held back below.
				continue
			}
		case ActionCreateCRR:
			deletes, wait, until := clearEarlierCRRs(in, stage, p.Containers)
			out = append(out, deletes...)
			if len(wait) > 0 {
				p.requeue(until.Sub(in.Now))
				held = append(held, fmt.Sprintf("the ContainerRecreateRequest %s for %v waits: %s", a.CRRName, a.Containers, strings.Join(wait, "; ")))
				heldCreate = a.Attempt
				if prev := stageCRR(in.CRRs, stage, a.Attempt-1); prev != nil && !prev.Created.IsZero() {
					// The failed attempt is recorded now, as kill does for a
					// retry that waits its backoff.
					if r, ok := recordAttempt(in, stage, prev.Attempt, prev.Created); ok {
						record = append(record, r)
					}
				}
				continue
			}
		case ActionSwapImage:
			at := in.Now
			if markStage == stage && !markAt.IsZero() {
				at = markAt
			}
			a.Stage = stage
			a.StageMark = strconv.Itoa(stage) + " " + at.UTC().Format(time.RFC3339)
		}
		out = append(out, a)
	}
	var writes []Action
	for _, a := range out {
		if a.Kind == ActionRecordAttempt || a.Kind == ActionRecordAPIGone {
			record = append(record, a)
			continue
		}
		writes = append(writes, a)
	}
	p.Actions = writes
	switch {
	case len(held) == 0:
	case len(writes) == 0:
		p = p.with(VerdictInProgress, strings.Join(held, "; "))
	default:
		p = p.with(VerdictAct, "the main containers are done: "+describeActions(writes)+"; "+strings.Join(held, "; "))
	}
	// The record is bookkeeping, not a stop: it leaves the verdict as it is.
	p.Actions = append(p.Actions, record...)
	return p
}

// stageCRR is the stage's CRR of that attempt, if the input has it.
func stageCRR(crrs []CRR, stage, attempt int) *CRR {
	for i := range crrs {
		if crrs[i].Stage == stage && crrs[i].Attempt == attempt {
			return &crrs[i]
		}
	}
	return nil
}

// stageWindowEnd is when the last stop window of the stage's CRRs closes:
// those the input has and the attempt the pod records for the stage.
func stageWindowEnd(in Input, stage int) time.Time {
	var end time.Time
	for _, c := range in.CRRs {
		if c.Stage == stage {
			end = later(end, c.windowEnd(in))
		}
	}
	if n, began := attemptRecord(in.Pod, stage); n > 0 && !began.IsZero() {
		end = later(end, began.Add(StopWindow(in.Pod, in.Policy)))
	}
	return end
}

// stopOrder reads the stop-order annotation: the named sidecars in order, or
// nil when the pod has no order or an unusable one, which comes with a
// Problem. An unusable order falls back to stopping every sidecar at once:
// waiting on a name that is not a sidecar could hang the pod.
func stopOrder(pod *corev1.Pod, containers []Container) ([]string, *Problem) {
	raw, ok := pod.Annotations[AnnotationStopOrder]
	if !ok {
		return nil, nil
	}
	byName := map[string]Container{} // names are unique across a pod's containers
	for _, c := range containers {
		byName[c.Name] = c
	}
	var order, issues []string
	seen := map[string]bool{}
	for n := range orderNames(raw) {
		c, known := byName[n]
		switch {
		case seen[n]:
			issues = append(issues, fmt.Sprintf("%q is named twice", n))
		case !known:
			issues = append(issues, fmt.Sprintf("%q is not a container of the pod", n))
		case c.Role == RoleMain:
			issues = append(issues, fmt.Sprintf("%q is a main container", n))
		case c.Role != RoleSidecar:
			issues = append(issues, fmt.Sprintf("%q is an %s container, not a sidecar", n, c.Role))
		case c.IgnoreExitCode:
			issues = append(issues, fmt.Sprintf("%q ignores its exit code, so it is always stopped last, after the phase is settled", n))
		}
		seen[n] = true
		order = append(order, n)
	}
	if len(issues) > 0 {
		sort.Strings(issues)
		return nil, &Problem{Reason: ReasonInvalidStopOrder, Message: fmt.Sprintf(
			"annotation %s=%q cannot be followed: %s; every sidecar is stopped at once instead", AnnotationStopOrder, raw, strings.Join(issues, "; "))}
	}
	if len(order) == 0 {
		return nil, nil
	}
	return order, nil
}

// stageIssuedAt is when the stage's kill was issued, as far as the input
// shows it: its first CRR's creation, or the mark a swap wrote with it.
func stageIssuedAt(stage int, crrs []CRR, markStage int, markAt time.Time) time.Time {
	var at time.Time
	for _, c := range crrs {
		if c.Stage == stage && (at.IsZero() || c.Created.Before(at)) {
			at = c.Created
		}
	}
	if markStage == stage && !markAt.IsZero() && (at.IsZero() || markAt.Before(at)) {
		at = markAt
	}
	return at
}

// stageMark reads AnnotationStopStage; a malformed one reads as none.
func stageMark(pod *corev1.Pod) (int, time.Time) {
	stage, at, ok := strings.Cut(pod.Annotations[AnnotationStopStage], " ")
	if !ok {
		return -1, time.Time{}
	}
	n, err := strconv.Atoi(stage)
	t, terr := time.Parse(time.RFC3339, at)
	if err != nil || terr != nil {
		return -1, time.Time{}
	}
	return n, t
}

func podGrace(pod *corev1.Pod) time.Duration {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(grace) * time.Second
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if contains(b, x) {
			return true
		}
	}
	return false
}

// orderNames yields the names of a stop-order annotation's value as written,
// trimmed, empty entries skipped: the one reading of its syntax, for
// stopOrder and namedStages.
func orderNames(raw string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for n := range strings.SplitSeq(raw, ",") {
			if n = strings.TrimSpace(n); n != "" && !yield(n) {
				return
			}
		}
	}
}
