package decision

import (
	"fmt"
	"time"
)

// followSwap follows a sidecar that already has its quick-exit image but has
// not terminated: the kubelet restarts it with that image, which exits at
// once. Within the pod's grace period plus the start allowance this is the
// stop under way; past it, something keeps it from ending (the image does
// not pull, the container does not start, the node ignores image updates),
// and a Warning names what the node reports. Either way the pod is looked
// at again: never silent.
//
// notBefore is the earliest the swap can have been made (the mains done, the
// CRR before it ended): a controller that restarted does not know when it
// swapped, and counting from its own start would let repeated restarts put
// the Warning off for ever.
func (p *Plan) followSwap(in Input, c Container, image string, notBefore time.Time) string {
	since, ok := in.SwappedAt[c.Name]
	if !ok {
		since = in.Now
		if !notBefore.IsZero() && notBefore.Before(in.Now) {
			since = notBefore
		}
		p.SwapsUnseen, p.SwapsSince = append(p.SwapsUnseen, c.Name), since
	}
	allowance := in.Policy.SwapStartAllowance
	if allowance <= 0 {
		allowance = DefaultPolicy().SwapStartAllowance
	}
	bound := PodGrace(in.Pod) + allowance
	if left := since.Add(bound).Sub(in.Now); left > 0 {
		p.requeue(left)
		return fmt.Sprintf("%q has its quick-exit image; the node restarts it with it", c.Name)
	}
	p.requeue(bound)
	why := swapStuck(c, image)
	p.Problems = append(p.Problems, Problem{Reason: ReasonQuickExitNotRunning, Message: fmt.Sprintf(
		"container %q was given the quick-exit image %s more than %s ago and has not terminated: %s", c.Name, image, bound, why)})
	return fmt.Sprintf("%q has its quick-exit image but has not terminated: %s", c.Name, why)
}

// SwappedTo is the quick-exit image the sidecar's spec already names (its
// own, or the operator's default), or empty when it was not swapped.
func (c Container) SwappedTo() string {
	for _, img := range []string{c.QuickExitImage, c.DefaultImage} {
		if img != "" && c.Image == img {
			return img
		}
	}
	return ""
}

// swapStuck says, from the container's status, why a swapped sidecar has not
// terminated: the kubelet's waiting reason, or the image it runs.
func swapStuck(c Container, image string) string {
	switch c.State {
	case StateWaiting:
		return "waiting: " + bounded(c.WaitingReason)
	case StateRunning:
		if c.StatusImage != "" && !sameImage(c.StatusImage, image) {
			return fmt.Sprintf("still running image %s: the node did not restart it with the new image (a provider that ignores image updates?)", bounded(c.StatusImage))
		}
		return "running the quick-exit image, which should have exited"
	}
	return "its state is " + string(c.State)
}

// sameImage compares a reported image with a spec image loosely: the node
// reports the reference it resolved (docker.io/library/..., a digest).
func sameImage(reported, spec string) bool {
	if reported == spec {
		return true
	}
	n := len(spec)
	return len(reported) > n && reported[len(reported)-n:] == spec && reported[len(reported)-n-1] == '/'
}

func bounded(s string) string {
	if len(s) <= MaxRefusalMessage {
		return s
	}
	return s[:MaxRefusalMessage] + "..."
}

// nodePath says, for explain, which way the pod's node can stop a sidecar:
// a CRR through kruise-daemon, or only an image swap, and why.
func nodePath(in Input) string {
	n := in.Node
	why := ""
	if n.DaemonWhy != "" {
		why = " (" + n.DaemonWhy + ")"
	}
	caps := n.Capabilities()
	switch {
	case !n.Found:
		return fmt.Sprintf("%q is not known: no path until it is", n.Name)
	case !caps.stopsOne():
		return fmt.Sprintf("%q is %s: no kruise-daemon, and an image change is ignored, so no sidecar can be stopped; the phase is settled from the main containers and the sidecars run on until the pod is deleted", n.Name, platformLine(n))
	case !caps.KruiseDaemon && caps.SidecarMark != "":
		return fmt.Sprintf("%q is %s: no kruise-daemon, so image swap only, at once; sidecars carrying %s are the platform's to stop, and the controller leaves them to it", n.Name, platformLine(n), caps.SidecarMark)
	case !caps.KruiseDaemon:
		return fmt.Sprintf("%q is %s: no kruise-daemon can run there, so image swap only, at once", n.Name, platformLine(n))
	case n.Daemon == DaemonAbsent:
		return fmt.Sprintf("%q runs no kruise-daemon%s: image swap only", n.Name, why)
	case !in.CRRAPI:
		return fmt.Sprintf("%q is a normal node, but the ContainerRecreateRequest API is not served: image swap only", n.Name)
	}
	return fmt.Sprintf("%q is a normal node (%s): ContainerRecreateRequest through kruise-daemon%s, image swap where a CRR cannot stop a sidecar", n.Name, platformLine(n), why)
}

// swapNotBefore is the earliest a swap can have been made: after the mains
// were done and after the pod's latest CRR ended (a swap follows a failed
// kill).
func swapNotBefore(mainsDone time.Time, latest *CRR, deadline time.Time) time.Time {
	t := mainsDone
	if latest == nil {
		return t
	}
	end := latest.Completed
	if end.IsZero() && !latest.Finished() {
		end = deadline
	}
	if end.After(t) {
		t = end
	}
	return t
}
