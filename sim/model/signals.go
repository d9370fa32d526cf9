package model

import (
	"fmt"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

// Stop sends SIGTERM to a running container and SIGKILL after the pod's grace
// period, as kruise-daemon (through the CRI) does. The restart policy then
// decides whether it runs again. It reports whether the container was running.
func (p *Pod) Stop(name string, now time.Time) (bool, error) {
	c := p.Container(name)
	if c == nil {
		return false, fmt.Errorf("pod %s has no container %q", p.Name, name)
	}
	p.Advance(now)
	stopped := p.signal(c, now, p.Grace)
	p.sync(now)
	return stopped, nil
}

// SetImage applies a change of the container's image in the pod spec: a
// running container is stopped and started again with the new image under any
// restart policy (its spec hash changed); one waiting to start pulls the new
// image. It reports whether a running container was stopped.
func (p *Pod) SetImage(name, image string, now time.Time) (bool, error) {
	c := p.Container(name)
	if c == nil {
		return false, fmt.Errorf("pod %s has no container %q", p.Name, name)
	}
	p.Advance(now)
	if c.Image == image {
		return false, nil
	}
	c.Image, c.pullFailed = image, false
	p.version++ // the status reports the spec's image
	stopped := false
	switch c.State {
	case Running:
		c.respawn = true
		stopped = p.signal(c, now, p.Grace)
	case Waiting:
		if c.op == opStart && c.Reason != "CrashLoopBackOff" {
			c.op = opNone // pulling the old image: pull the new one instead
		}
	}
	p.sync(now)
	return stopped, nil
}

// Delete starts the pod's graceful deletion: every container is stopped and
// nothing starts again. Gone reports when all have stopped.
func (p *Pod) Delete(now time.Time) {
	p.Advance(now)
	p.deleting = true
	p.sync(now)
}

// Finish is the kubelet seeing the pod's phase made terminal by someone
// else in the API (a controller settling it): it stops every container, as
// for a deletion, but the pod object stays and Gone stays false.
func (p *Pod) Finish(now time.Time) {
	p.Advance(now)
	p.finishing = true
	p.sync(now)
}

// Gone reports whether a deleted pod has no container left running.
func (p *Pod) Gone() bool {
	if !p.deleting {
		return false
	}
	for _, c := range p.all() {
		if c.State == Running {
			return false
		}
	}
	return true
}

// signal sends SIGTERM: a process that handles it exits soon with its code,
// one that ignores it is killed at the end of the grace period. A process
// that would exit on its own before that keeps its own exit.
func (p *Pod) signal(c *Container, now time.Time, grace time.Duration) bool {
	if c.State != Running || c.stopping {
		return false
	}
	c.stopping = true
	at, code := now.Add(p.cfg.Timings.SIGTERMExit), c.Behaviour.SIGTERMExitCode
	switch {
	case c.Behaviour.IgnoreSIGTERM || p.cfg.Images.QuickExit[c.lastImage]: // the running image, not the spec's
		at, code = now.Add(grace), exitSIGKILL
	case c.Behaviour.DeliverPort != 0 && !p.listening(c, c.Behaviour.DeliverPort, at):
		code = spec.ExitLost
	case c.Behaviour.DeliverPort != 0:
		code = 0
	}
	if c.op == opExit && c.at.Before(at) {
		return true
	}
	c.schedule(opExit, at, code)
	return true
}

// listening reports whether a container of the pod other than from, running
// its own (not a quick-exit) image, still listens on port at the moment at:
// a proxy stopped at the same moment is gone by then, as when both get
// SIGTERM together.
func (p *Pod) listening(from *Container, port int, at time.Time) bool {
	for _, x := range p.all() {
		if x == from || x.Behaviour.ListenPort != port || x.State != Running || p.cfg.Images.QuickExit[x.lastImage] {
			continue
		}
		if x.stopping && x.op == opExit && !x.at.After(at) {
			continue
		}
		return true
	}
	return false
}
