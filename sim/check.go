package sim

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// truth is what the simulator knows of a pod independently of the controller:
// which containers are really sidecars, and what must happen to the pod.
type truth struct {
	sidecars map[string]bool
	native   []string // moved to initContainers at admission

	mains       []string
	expect      Expect
	mainsDoneAt time.Time
	terminalAt  time.Time
	stoppedAt   time.Time
	warned      bool
	settled     bool
	gone        bool
	recreated   bool
	// stageOf is each sidecar's stop-order stage when the pod carries an
	// order the controller must follow; nil otherwise. ignoring are the
	// ignore-exit-code sidecars, stopped last whatever the order.
	stageOf  map[string]int
	ignoring map[string]bool
	grace    time.Duration
	heldUp   bool // a StopOrderHeldUp Warning was recorded
	// jobWarned: a JobPolicyReadsSidecarExit Warning was recorded.
	jobWarned bool
	// crrs counts the CRRs created for the pod; killed is each sidecar's
	// last stop: when, and which run of it (its restart count).
	crrs   int
	killed map[string]killMark
	// writtenBack: the kubelet wrote its phase back over a settle once;
	// settledAt: the latest settle, from which the kubelet's grace runs.
	writtenBack bool
	settledAt   time.Time
	// restartedAll: the kubelet's in-place restarts of the whole pod when
	// its mains were done; any later one reruns finished mains.
	restartedAll int
}

type killMark struct {
	at       time.Time
	restarts int32
}

func newTruth(t *Template, pod *corev1.Pod) *truth {
	tr := &truth{sidecars: map[string]bool{}, expect: t.Expect, ignoring: map[string]bool{}, grace: 30 * time.Second, killed: map[string]killMark{}}
	if t.Grace > 0 {
		tr.grace = time.Duration(t.Grace) * time.Second
	}
	for _, c := range t.Containers {
		if c.Sidecar {
			tr.sidecars[c.Name] = true
		} else {
			tr.mains = append(tr.mains, c.Name)
		}
		for _, e := range c.Env {
			if e.Name == decision.EnvIgnoreExitCode && e.Value == "true" {
				tr.ignoring[c.Name] = true
			}
		}
	}
	// A sidecar the webhook moved to initContainers is a native sidecar:
	// the kubelet's to stop, never the controller's (admission.go).
	for _, moved := range native.Moved(pod) {
		delete(tr.sidecars, moved)
		tr.native = append(tr.native, moved)
	}
	tr.stageOf = orderTruth(t, tr)
	if len(tr.native) > 0 {
		// The stop order became the start order; no stop of ours is judged by it.
		tr.stageOf = nil
	}
	return tr
}

// orderTruth is the stop order the checker holds the controller to: the
// template's, when every name is a marked sidecar that does not ignore its
// exit code, named once. Otherwise the controller must fall back to
// stopping all at once, which the other invariants judge.
func orderTruth(t *Template, tr *truth) map[string]int {
	raw, ok := t.Annotations[decision.AnnotationStopOrder]
	if !ok {
		return nil
	}
	marked := map[string]bool{}
	for _, c := range t.Containers {
		for _, e := range c.Env {
			if c.Sidecar && (e.Name == decision.EnvTerminate || e.Name == decision.EnvTerminateWithImage) {
				marked[c.Name] = true
			}
		}
	}
	stageOf := map[string]int{}
	for i, n := range strings.Split(raw, ",") {
		n = strings.TrimSpace(n)
		if _, twice := stageOf[n]; twice || !marked[n] || tr.ignoring[n] {
			return nil
		}
		stageOf[n] = i + 1
	}
	return stageOf
}

// podTTLAfterFinished is how long a finished pod stays.
const podTTLAfterFinished = 2 * time.Minute

// Violation is a broken invariant, with what it takes to replay it.
type Violation struct {
	Kind     string // safety or liveness
	Scenario string
	Seed     uint64
	Pods     int
	Step     uint64
	At       time.Duration
	Pod      string
	Message  string
	Trace    []string
}

func (v *Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s violation in scenario %s, seed %d, step %d, at %s, pod %s:\n  %s\n", v.Kind, v.Scenario, v.Seed, v.Step, fmtDur(v.At), v.Pod, v.Message)
	fmt.Fprintf(&b, "replay: go run ./sim/cmd/sim --scenario %s --seed %d --pods %d --trace-pod %s\n", v.Scenario, v.Seed, v.Pods, v.Pod)
	for _, l := range v.Trace {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

// Checker holds the invariants, checked as each step happens.
type Checker struct {
	s         *Sim
	unsettled int
	violation *Violation
	latencies []time.Duration
	// secondSeenAt: the controller's first SecondTerminator Warning.
	secondSeenAt time.Time
}

func newChecker(s *Sim) *Checker { return &Checker{s: s} }

func (ch *Checker) violate(kind string, e *podEntry, format string, args ...any) {
	if ch.violation != nil {
		return
	}
	ch.record(kind, e.obj.Name, fmt.Sprintf(format, args...))
}

func (ch *Checker) record(kind, pod, message string) {
	s := ch.s
	ch.violation = &Violation{Kind: kind, Scenario: s.sc.Name, Seed: s.seed, Pods: s.sc.Pods, Step: s.step,
		At: s.now().Sub(Epoch), Pod: pod, Message: message}
	s.trace.add(pod, "VIOLATION %s: %s", kind, message)
}

// runaway is the liveness violation of a run that exceeds its step bounds.
// It names the pod the trace spoke of last: the one the loop is about, or
// the nearest clue to it.
func (ch *Checker) runaway(format string, args ...any) {
	if ch.violation != nil {
		return
	}
	pod := ch.s.trace.lastPod
	if pod == "" {
		pod = "controller"
	}
	ch.record("liveness", pod, fmt.Sprintf(format, args...))
	ch.violation.Trace = ch.s.trace.about(pod)
}

func (ch *Checker) podCreated(e *podEntry) {
	if e.truth.expect == ExpectIgnored {
		e.truth.settled = true
		return
	}
	ch.unsettled++
}

func (ch *Checker) settle(e *podEntry) {
	if !e.truth.settled {
		e.truth.settled = true
		ch.unsettled--
	}
}

// podChanged follows the pod's truth: mains done, sidecars stopped, terminal.
func (ch *Checker) podChanged(e *podEntry, old *corev1.Pod) {
	tr, s := e.truth, ch.s
	if e.rt == nil {
		return
	}
	if !tr.mainsDoneAt.IsZero() && e.rt.RestartedAll() > tr.restartedAll {
		// Once the mains are done only a stop can end a sidecar (the
		// templates' sidecars never exit on their own): a stop made the
		// kubelet restart every container, and the mains run again.
		tr.restartedAll = e.rt.RestartedAll()
		ch.violate("safety", e, "the kubelet restarted every container in place %s after the mains were done: a stop matched a RestartAllContainers rule, and finished mains run again",
			s.now().Sub(tr.mainsDoneAt))
	}
	if tr.mainsDoneAt.IsZero() && mainsActive(e) == "" {
		tr.mainsDoneAt = s.now()
		tr.restartedAll = e.rt.RestartedAll()
		s.after(s.sc.Bound, func() { ch.liveness(e) })
		if r := e.tmpl.DeleteAfterMainsDone; !r.zero() {
			s.after(s.draw(r), func() { s.world.deletePod(e, "deleted after its mains finished") })
		}
		ch.maybeSettle(e)
	}
	phase := e.obj.Status.Phase
	if phase == corev1.PodFailed {
		ch.failJobLater(e)
		if old == nil || old.Status.Phase != corev1.PodFailed {
			ch.phaseFromMains(e)
		}
	}
	if tr.terminalAt.IsZero() && (phase == corev1.PodSucceeded || phase == corev1.PodFailed) {
		tr.terminalAt = s.now()
		ch.jobVerdict(e)
		ch.settle(e)
		// The Job controller's ttlSecondsAfterFinished: finished pods go,
		// as in a real cluster, so a long run does not hold every pod.
		s.after(podTTLAfterFinished, func() { s.world.deletePod(e, "ttl after finished") })
	}
	if !tr.mainsDoneAt.IsZero() && tr.stoppedAt.IsZero() && sidecarsStopped(e) {
		tr.stoppedAt = s.now()
		ch.latencies = append(ch.latencies, tr.stoppedAt.Sub(tr.mainsDoneAt))
	}
}

// phaseFromMains: a pod whose ignore-exit-code sidecars only failed it
// must not end Failed by their exits after stops of ours while every main
// exited 0; its phase is settled from the mains before they are stopped.
// A stop landing on a phase the kubelet wrote back is such a stop.
func (ch *Checker) phaseFromMains(e *podEntry) {
	if e.obj.Status.Phase != corev1.PodFailed || len(e.truth.ignoring) == 0 {
		return
	}
	var failedBy []string
	for _, cs := range e.obj.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		if _, killed := e.truth.killed[cs.Name]; !e.truth.ignoring[cs.Name] || !killed {
			return
		}
		failedBy = append(failedBy, fmt.Sprintf("%s=%d", cs.Name, t.ExitCode))
	}
	if len(failedBy) > 0 {
		ch.violate("safety", e, "the pod ended Failed though every main exited 0: the exits of ignore-exit-code sidecars stopped by us (%s) decided its phase", strings.Join(failedBy, ", "))
	}
}

func (ch *Checker) podGone(e *podEntry) {
	e.truth.gone = true
	ch.settle(e)
}

func (ch *Checker) event(pod *corev1.Pod, eventtype, reason string) {
	e := ch.s.world.byUID[pod.UID]
	if e == nil || eventtype != corev1.EventTypeWarning {
		return
	}
	e.truth.warned = true
	e.truth.jobWarned = e.truth.jobWarned || reason == decision.ReasonJobPolicyReadsSidecarExit
	if reason == decision.ReasonSecondTerminator && ch.secondSeenAt.IsZero() {
		ch.secondSeenAt = ch.s.now()
	}
	if reason == decision.ReasonStopOrderHeldUp {
		// No stage may be given up on before a stopped sidecar could have
		// had its grace period: the bound counts from a kill, which comes
		// after the mains are done.
		if bound := e.truth.mainsDoneAt.Add(e.truth.grace + 10*time.Second); e.truth.mainsDoneAt.IsZero() || ch.s.now().Before(bound) {
			ch.violate("safety", e, "stop order given up at %s, before any stage's bound could pass", fmtDur(ch.s.now().Sub(Epoch)))
		}
		e.truth.heldUp = true
	}
	ch.maybeSettle(e)
}

func (ch *Checker) maybeSettle(e *podEntry) {
	tr := e.truth
	if tr.warned && !tr.mainsDoneAt.IsZero() && (tr.expect == ExpectWarning || tr.expect == ExpectEither) {
		ch.settle(e)
	}
}

// liveness runs Bound after a pod's mains are done.
func (ch *Checker) liveness(e *podEntry) {
	tr := e.truth
	if tr.gone || e.gone {
		return
	}
	terminal := !tr.terminalAt.IsZero()
	switch {
	case tr.expect == ExpectTerminal && !terminal:
		ch.violate("liveness", e, "mains done %s ago, pod still %s (want Succeeded/Failed)", ch.s.sc.Bound, e.obj.Status.Phase)
	case tr.expect == ExpectWarning && !tr.warned:
		ch.violate("liveness", e, "mains done %s ago, no termination path, and no Warning event", ch.s.sc.Bound)
	case tr.expect == ExpectEither && !terminal && !tr.warned:
		ch.violate("liveness", e, "mains done %s ago, pod still %s and no Warning event", ch.s.sc.Bound, e.obj.Status.Phase)
	case tr.expect == ExpectWarnedTerminal && !(terminal && tr.warned):
		ch.violate("liveness", e, "mains done %s ago: pod %s, Warning %v; want both a Warning and Succeeded/Failed", ch.s.sc.Bound, e.obj.Status.Phase, tr.warned)
	}
}

// kill checks one container being stopped on the controller's behalf.
func (ch *Checker) kill(e *podEntry, container, cause string) {
	if !e.truth.sidecars[container] {
		ch.violate("safety", e, "%s stopped main container %q", cause, container)
		return
	}
	if why := mainsActive(e); why != "" {
		ch.violate("safety", e, "%s stopped sidecar %q while %s", cause, container, why)
		return
	}
	if tr := e.truth; tr.ignoring[container] && !tr.settledAt.IsZero() && ch.s.now().Before(tr.settledAt.Add(tr.grace)) && cause != "image change" {
		ch.violate("safety", e, "%s stopped ignore-exit-code sidecar %q %s after the phase was settled, while the kubelet may still be stopping it (grace %s)",
			cause, container, ch.s.now().Sub(tr.settledAt), tr.grace)
		return
	}
	e.truth.killed[container] = killMark{at: ch.s.now(), restarts: e.rt.Container(container).RestartCount}
	ch.inOrder(e, container, cause)
}

// inOrder checks the stop order: no sidecar of a later stage is stopped
// while one of an earlier stage still runs, unless the controller said (a
// StopOrderHeldUp Warning) that the earlier one's bound passed.
func (ch *Checker) inOrder(e *podEntry, container, cause string) {
	tr := e.truth
	if tr.stageOf == nil || tr.ignoring[container] || tr.heldUp {
		return
	}
	for _, name := range e.tmpl.sidecarNames() {
		if tr.ignoring[name] || tr.stageOf[name] >= tr.stageOf[container] {
			continue
		}
		// A sidecar swapped to the quick-exit image runs that image's
		// instant exit, no longer the sidecar's own work.
		if c := e.rt.Container(name); c.State == model.Running && c.Image != QuickExitImage {
			ch.violate("safety", e, "%s stopped %q (stop-order stage %d) while %q (stage %d) still runs, with no StopOrderHeldUp Warning",
				cause, container, tr.stageOf[container], name, tr.stageOf[name])
			return
		}
	}
}

// mainsActive says why the pod's mains are not done, in the kubelet's truth;
// empty when they are all done for good.
func mainsActive(e *podEntry) string {
	if e.rt == nil {
		return "the pod has not started"
	}
	for _, name := range e.truth.mains {
		// The kubelet model's restart rules: the pod's policy, the
		// container's own policy and its restartPolicyRules.
		c := e.rt.Container(name)
		switch {
		case c.State != model.Terminated:
			return fmt.Sprintf("main %q is %s", name, c.State)
		case e.rt.RunsAgain(name):
			return fmt.Sprintf("main %q exited %d and its restart rules run it again", name, c.ExitCode)
		}
	}
	return ""
}

func sidecarsStopped(e *podEntry) bool {
	for name := range e.truth.sidecars {
		// A sidecar swapped to the quick-exit image runs that image's
		// instant exit, no longer the sidecar's own work.
		if c := e.rt.Container(name); c.State == model.Running && c.Image != QuickExitImage {
			return false
		}
	}
	return true
}

// final runs when the run ends: liveness for pods whose check is due.
func (ch *Checker) final() {
	ch.finalBesideKruise()
	for _, key := range ch.s.sortedPodKeys() {
		e := ch.s.world.pods[key]
		if !e.truth.mainsDoneAt.IsZero() && !ch.s.now().Before(e.truth.mainsDoneAt.Add(ch.s.sc.Bound)) {
			ch.liveness(e)
		}
	}
}
