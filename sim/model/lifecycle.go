package model

import (
	"fmt"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

const (
	exitSIGKILL = 137
	// crashLoopShown is how long a failed container shows Terminated before
	// the kubelet's next sync reports it Waiting in CrashLoopBackOff: the
	// window in which an OnFailure main looks finished but is not.
	crashLoopShown = time.Second
)

// Advance applies, in time order, every transition due at or before now and
// the kubelet's reactions to each. It reports whether anything changed.
func (p *Pod) Advance(now time.Time) bool {
	changed := p.sync(now)
	for {
		c := p.due(now)
		if c == nil {
			return changed
		}
		at := c.at
		p.apply(c, at)
		p.sync(at)
		changed = true
	}
}

// due returns the container with the earliest transition at or before now;
// spec order breaks ties, so the order never depends on map iteration.
func (p *Pod) due(now time.Time) *Container {
	var first *Container
	for _, c := range p.all() {
		if c.op != opNone && !c.at.After(now) && (first == nil || c.at.Before(first.at)) {
			first = c
		}
	}
	return first
}

func (p *Pod) apply(c *Container, at time.Time) {
	p.version++
	switch c.op {
	case opStart:
		c.op = opNone
		p.start(c, at)
	case opExit:
		c.op = opNone
		if !c.stopping {
			c.runs++
		}
		if c.respawn && !p.deleting && !p.finishing && p.cfg.Images.pullable(c.Image) {
			// The kubelet kills the instance whose spec changed and starts
			// the new one in the same pod sync, and reports the pod's status
			// only from the sync before or after it (k8s.io/kubernetes
			// v1.37.2, pkg/kubelet/kubelet.go SyncPod sets the status before
			// it calls the runtime's SyncPod; kuberuntime_manager.go SyncPod
			// kills in step 3 and starts in step 9): the killed instance's
			// exit never shows as the container's state, and the phase is
			// not settled on it. It shows as the last state once the new
			// instance runs.
			c.killed = &Exit{ExitCode: c.code, FinishedAt: at}
			c.schedule(opStart, at.Add(p.startDelay(c)), 0)
			return
		}
		c.State, c.ExitCode, c.FinishedAt = Terminated, c.code, at
	case opBackoff:
		c.op = opNone
		c.Last = &Exit{ExitCode: c.ExitCode, FinishedAt: c.FinishedAt}
		c.State, c.Reason = Waiting, "CrashLoopBackOff"
		c.schedule(opStart, c.FinishedAt.Add(c.backoff), 0)
	}
}

func (p *Pod) start(c *Container, at time.Time) {
	if !p.cfg.Images.pullable(c.Image) {
		if c.State == Terminated {
			c.Last = &Exit{ExitCode: c.ExitCode, FinishedAt: c.FinishedAt}
		}
		c.State, c.Reason, c.pullFailed = Waiting, "ErrImagePull", true
		return
	}
	if c.State == Terminated {
		c.Last = &Exit{ExitCode: c.ExitCode, FinishedAt: c.FinishedAt}
	}
	if c.killed != nil {
		c.Last, c.killed = c.killed, nil
	}
	if c.instances > 0 {
		c.RestartCount++
	}
	c.instances++
	c.ID = fmt.Sprintf("sim://%s/%s/%d", p.Name, c.Name, c.instances)
	c.State, c.Reason, c.StartedAt, c.lastImage = Running, "", at, c.Image
	c.stopping, c.respawn = false, false
	switch run, ok := c.Behaviour.run(c.runs); {
	case p.cfg.Images.QuickExit[c.Image]:
		c.schedule(opExit, at.Add(p.cfg.Timings.QuickExitRun), 0)
	case ok:
		c.schedule(opExit, at.Add(run.Duration), run.ExitCode)
	}
}

func (c *Container) schedule(o op, at time.Time, code int32) {
	c.op, c.at, c.code = o, at, code
}

// sync is the kubelet's pod sync: start what may start, restart what the
// policy restarts, stop native sidecars once the regular containers are done,
// and compute the phase. A terminal phase never changes again.
func (p *Pod) sync(now time.Time) bool {
	before := p.Phase
	if p.deleting || p.finishing {
		for _, c := range p.all() {
			p.signal(c, now, p.Grace)
			if c.op == opStart || c.op == opBackoff {
				c.op = opNone
			}
			if k := c.killed; k != nil {
				// Killed for a spec change, not started again: it ends.
				c.State, c.ExitCode, c.FinishedAt, c.killed = Terminated, k.ExitCode, k.FinishedAt, nil
			}
		}
		return false
	}
	if p.Terminal() {
		return false
	}
	if p.restartAll(now) {
		p.Phase = p.phase()
		return p.Phase != before
	}
	if p.syncInit(now) {
		for _, c := range p.Regular {
			p.maybeStart(c, now)
		}
		if p.regularDone() {
			for i := len(p.Init) - 1; i >= 0; i-- {
				if p.Init[i].Kind == KindNativeSidecar {
					p.signal(p.Init[i], now, p.Grace)
				}
			}
		}
	}
	p.Phase = p.phase()
	if p.Phase != before {
		p.version++
	}
	if p.Terminal() {
		// A finished pod runs nothing more: pending starts are dropped.
		for _, c := range p.all() {
			if c.op == opStart || c.op == opBackoff {
				c.op = opNone
			}
		}
	}
	return p.Phase != before
}

// syncInit runs init containers in order; it reports whether all are done
// (native sidecars count once started).
func (p *Pod) syncInit(now time.Time) bool {
	for _, c := range p.Init {
		p.maybeStart(c, now)
		if c.Kind == KindNativeSidecar {
			if c.instances == 0 {
				return false
			}
			continue
		}
		if c.State != Terminated || c.ExitCode != 0 {
			return false
		}
	}
	return true
}

// maybeStart schedules a start for a container that should run and has
// nothing scheduled: never started, or restarted by policy or spec change.
func (p *Pod) maybeStart(c *Container, now time.Time) {
	if c.op != opNone {
		return
	}
	switch c.State {
	case Waiting:
		if !c.pullFailed {
			c.schedule(opStart, now.Add(p.startDelay(c)), 0)
		}
	case Terminated:
		if !p.restarts(c) {
			return
		}
		if c.respawn {
			// Its new image cannot be pulled (apply): the kubelet's next
			// sync shows the killed instance's exit, and under Never does
			// not start it again (ShouldContainerBeRestarted), so the phase
			// may settle on that exit first.
			c.schedule(opStart, now.Add(p.startDelay(c)), 0)
			return
		}
		c.backoff = nextBackoff(c.backoff, p.cfg.Timings)
		shown := crashLoopShown
		if shown > c.backoff {
			shown = c.backoff
		}
		c.schedule(opBackoff, c.FinishedAt.Add(shown), 0)
	}
}

func nextBackoff(prev time.Duration, t Timings) time.Duration {
	if prev == 0 {
		return t.RestartBackoff
	}
	if next := 2 * prev; next < t.MaxRestartBackoff {
		return next
	}
	return t.MaxRestartBackoff
}

func (p *Pod) startDelay(c *Container) time.Duration {
	if c.Image != c.lastImage {
		return p.cfg.Timings.Start + p.cfg.Timings.Pull
	}
	return p.cfg.Timings.Start
}

// restartAll plays the kubelet's in-place restart of the whole pod
// (KEP-5532, gate RestartAllContainersOnContainerExits: beta and on by
// default from Kubernetes 1.36; an API server admits the rule only where it
// is on, so every pod that carries one runs it). From k8s.io/kubernetes
// v1.37.2:
//   - pkg/kubelet/container/helpers.go ShouldAllContainersRestart: an exited
//     container (init, native sidecar or regular) whose exit matches one of
//     its RestartAllContainers rules marks the pod (condition
//     AllContainersRestarting, pkg/kubelet/status/generate.go);
//   - pkg/kubelet/kuberuntime/kuberuntime_manager.go computePodActions and
//     getContainersToReset: every container is killed (running ones, with
//     the pod's grace period) and removed, the ones that triggered it last;
//     SyncPod then starts the pod again from its first init container;
//   - pkg/kubelet/kubelet_pods.go convertToAPIContainerStatuses: a removed
//     container shows Waiting, its last state terminated with reason
//     RestartingAllContainers.
//
// A terminal pod is never restarted (sync returns before). It reports whether
// a restart is under way, so nothing else starts in this sync.
func (p *Pod) restartAll(now time.Time) bool {
	if !p.restartingAll {
		for _, c := range p.all() {
			if c.State == Terminated && !c.respawn && decision.ContainerRestart(p.RestartPolicy, &c.rules, c.ExitCode).AllContainers {
				p.restartingAll = true
				p.version++
				break
			}
		}
	}
	if !p.restartingAll {
		return false
	}
	running := false
	for _, c := range p.all() {
		if c.op == opStart || c.op == opBackoff {
			c.op = opNone
		}
		if c.State == Running {
			p.signal(c, now, p.Grace)
			running = true
		}
	}
	if running {
		return true
	}
	for _, c := range p.all() {
		if c.State == Terminated {
			c.Last = &Exit{ExitCode: c.ExitCode, FinishedAt: c.FinishedAt, Reason: decision.RestartingAllContainersReason}
		}
		c.State, c.Reason, c.ID = Waiting, decision.RestartingAllContainersReason, ""
		c.op, c.stopping, c.respawn, c.backoff = opNone, false, false, 0
	}
	p.restartingAll = false
	p.restartedAll++
	p.version++
	return false
}

// RestartedAll counts the in-place restarts of the whole pod so far.
func (p *Pod) RestartedAll() int { return p.restartedAll }

// RestartingAll reports whether the kubelet is restarting every container of
// the pod in place: the condition AllContainersRestarting.
func (p *Pod) RestartingAll() bool { return p.restartingAll }

// restarts applies the restart rules to a terminated container. Regular and
// init containers follow the kubelet's rules at the pinned version, the very
// function the controller decides with (decision.ContainerRestart: the
// container's restartPolicyRules, its own restartPolicy, else the pod's); an
// init container that exited 0 is done (kuberuntime_container.go
// computeInitContainerActions asks ShouldContainerBeRestarted on failure
// only). A matched RestartAllContainers rule (KEP-5532) runs the container
// again too, with every other one: restartAll.
func (p *Pod) restarts(c *Container) bool {
	switch {
	case c.respawn:
		return true // the spec changed: restarted whatever the policy
	case c.Kind == KindNativeSidecar:
		return !p.regularDone()
	case c.Kind == KindInit && c.ExitCode == 0:
		return false
	}
	return decision.RestartsAfter(p.RestartPolicy, &c.rules, c.ExitCode)
}

// RunsAgain reports whether the kubelet will run the named container again:
// it has not terminated, or its restart rules restart it.
func (p *Pod) RunsAgain(name string) bool {
	c := p.Container(name)
	return c != nil && (c.State != Terminated || c.op != opNone || p.restarts(c))
}

// regularDone reports whether every regular container has terminated for
// good: nothing will run in them again.
func (p *Pod) regularDone() bool {
	for _, c := range p.Regular {
		if c.State != Terminated || c.op != opNone || p.restarts(c) {
			return false
		}
	}
	return true
}
