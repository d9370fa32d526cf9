package decision

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// CRRContainerState is kruise-daemon's state of one container of a CRR
// (status.containerRecreateStates): Pending, Recreating, Succeeded or
// Failed; Killed when the daemon itself stopped it.
type CRRContainerState struct {
	Name   string
	Phase  string
	Killed bool
}

// CRRState is one of the pod's ContainerRecreateRequests as kruise reports
// it, and what that phase means for the pod, for `explain`.
type CRRState struct {
	Name    string
	Attempt int
	// Phase is kruise's status.phase as written; "" before kruise-daemon
	// took the CRR up.
	Phase string
	// Containers is each target with kruise-daemon's state of it.
	Containers []string
	Meaning    string
}

// The phases of a CRR, as kruise writes them. kruise-daemon
// (github.com/openkruise/kruise v1.9.1,
// pkg/daemon/containerrecreate/crr_daemon_controller.go) sets Pending on a
// CRR waiting behind another of the same pod (it works on one at a time,
// pickRecreateRequest), Recreating on the one it works on, and Completed
// once every target's state is Succeeded or Failed. kruise-manager
// (pkg/controller/containerrecreaterequest/crr_controller.go) completes a
// CRR the daemon has not answered within a minute, one past its
// activeDeadlineSeconds, and one whose pod has gone. A target's state stays
// Recreating while the container is exited (crr_daemon_util.go): under
// restartPolicy Never the kubelet never recreates it, so a CRR that did its
// job stays Recreating until its deadline.
const (
	crrPhasePending    = "Pending"
	crrPhaseRecreating = "Recreating"
	crrPhaseCompleted  = "Completed"
	// crrDaemonResponse is kruise-manager's responseTimeout.
	crrDaemonResponse = time.Minute
)

// CRRStates describes the pod's CRRs, oldest attempt first.
func CRRStates(in Input) []CRRState {
	status := map[string]Container{}
	for _, c := range containersOf(in) {
		status[c.Name] = c
	}
	out := make([]CRRState, 0, len(in.CRRs))
	for _, c := range in.CRRs {
		s := CRRState{Name: c.Name, Attempt: c.Attempt, Phase: c.Phase}
		states := map[string]CRRContainerState{}
		for _, st := range c.States {
			states[st.Name] = st
		}
		stopped := len(c.Containers) > 0
		for _, name := range c.Containers {
			desc := name + "=-"
			if st, ok := states[name]; ok {
				desc = name + "=" + st.Phase
				if st.Killed {
					desc += "(killed)"
				}
			}
			s.Containers = append(s.Containers, desc)
			if ctr, ok := status[name]; !ok || ctr.State != StateTerminated {
				stopped = false
			}
		}
		s.Meaning = crrMeaning(in, c, stopped)
		if c.Unseen {
			// Deleted since, its CRD removed, or its label stripped by a
			// policy: what explain says of it cannot be newer than that.
			s.Meaning = "as last seen (the controller's cache does not show it): " + s.Meaning
		}
		out = append(out, s)
	}
	// Attempts are few; a stable insertion sort keeps equal ones in order.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Attempt < out[j-1].Attempt; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// containersOf classifies the pod's containers for their states, whether or
// not Decide looks at the pod (a finished pod still has its CRRs).
func containersOf(in Input) []Container {
	if in.Pod == nil {
		return nil
	}
	cs, _ := Classify(in.Pod, in.Policy)
	return cs
}

// crrMeaning says, in one sentence, what the CRR's phase means here.
// stopped is true when every container it names has terminated.
func crrMeaning(in Input, c CRR, stopped bool) string {
	d := c.Deadline
	if d <= 0 && in.Pod != nil {
		d = CRRDeadline(in.Pod, in.Policy)
	}
	deadline := c.Created.Add(d)
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	passed := !in.Now.Before(deadline)
	switch {
	case c.Phase == crrPhaseCompleted || c.Finished():
		why := "its containers are done"
		if c.Message != "" {
			why = "kruise says: " + BoundMessage(c.Message)
		}
		if c.Completed.IsZero() {
			return fmt.Sprintf("finished (%s)", why)
		}
		return fmt.Sprintf("finished at %s (%s)", at(c.Completed), why)
	case stopped && c.Phase == crrPhaseRecreating:
		return fmt.Sprintf("its containers have stopped, so the kill is done; kruise keeps it Recreating (nothing is recreated once the pod will not run them again) until its deadline at %s", at(deadline))
	case stopped:
		return fmt.Sprintf("its containers have stopped; kruise completes it at its deadline at %s", at(deadline))
	case passed:
		return fmt.Sprintf("its deadline passed at %s with %s not stopped: a failed kill; kruise-manager completes it at its next sync", at(deadline), strings.Join(c.Containers, ", "))
	case c.Phase == crrPhasePending:
		return fmt.Sprintf("kruise-daemon works on another ContainerRecreateRequest of this pod first (one at a time); deadline %s", at(deadline))
	case c.Phase == crrPhaseRecreating:
		return fmt.Sprintf("kruise-daemon is stopping its containers; deadline %s", at(deadline))
	case c.Phase == "":
		return fmt.Sprintf("not yet taken up by kruise-daemon (kruise-manager completes it if the daemon has not answered by %s); deadline %s",
			at(c.Created.Add(crrDaemonResponse)), at(deadline))
	}
	return fmt.Sprintf("phase %q; deadline %s", BoundMessage(c.Phase), at(deadline))
}

// stopMargin is added to the pod's grace period after a CRR ends with a
// target's stop under way: the node reporting the container stopped.
const stopMargin = 10 * time.Second

// stopUnderWay reports whether kruise-daemon may still be stopping the
// container for the CRR, which ended (its deadline passed, or kruise-manager
// completed it) with the container still running; and until when. kruise-
// daemon records a target's state before it stops it, then stops it through
// the CRI with the pod's grace period, a call that returns once the container
// has stopped (SIGKILL at the end of the grace period), and only then marks
// it killed (manage in pkg/daemon/containerrecreate/crr_daemon_controller.go,
// kruise v1.9.1). kruise-manager completing the CRR at its deadline does not
// cut that call short. So a target with a state that is neither killed nor
// failed may be in its grace period, which ends at the latest a grace period
// after the CRR ended: a second CRR or a swap before then would stop it again
// while it drains. A CRR kruise-daemon never took up has no states.
func stopUnderWay(in Input, crr *CRR, container string, deadline time.Time) (time.Time, bool) {
	if crr == nil {
		return time.Time{}, false
	}
	if !crr.Finished() && !in.Now.Before(deadline) {
		// kruise-manager completes a CRR at its deadline, and its completion
		// carries kruise-daemon's last states. Until the cache shows it (a
		// lagging or relisting informer, or never: the CRR gone from the
		// cache, or never in it), a stop kruise-daemon began as late as the
		// deadline is not seen, and may run a grace period past it: the
		// CRR's whole stop window (window.go). Deleting the CRR, or its CRD,
		// does not cut kruise-daemon's CRI call short.
		until := deadline.Add(PodGrace(in.Pod) + stopMargin)
		return until, in.Now.Before(until)
	}
	for _, st := range crr.States {
		if st.Name != container || st.Killed || st.Phase == "Failed" || st.Phase == "Succeeded" {
			continue
		}
		end := deadline
		if !crr.Completed.IsZero() && crr.Completed.Before(end) {
			end = crr.Completed
		}
		until := end.Add(PodGrace(in.Pod) + stopMargin)
		return until, in.Now.Before(until)
	}
	return time.Time{}, false
}

// stopsAfterCRD reports whether a swap of the running container must wait
// for stops kruise-daemon may have begun under CRRs the controller no longer
// sees because their CRD was removed, and until when. Removing the CRD
// deletes every CRR, and kruise-daemon takes up none after (it works from its
// informer's CRRs), but a CRI stop it had begun runs on for up to the pod's
// grace period (stopUnderWay). A controller that remembers its CRRs waits
// for each (Unseen); one that started, or took the lead, after the removal
// remembers none, and a CRR another replica made is not in its memory
// either. Every such CRR was made before the API went away, so every stop
// under one began before the controller learned of it: on a node kruise-
// daemon serves, a swap waits until then plus the grace period and a
// margin. Nodes where no daemon shows (none at all, or OpenKruise gone
// whole, NodeImages with it) have nothing to wait for.
//
// A replica knows only when it found the API gone itself, and a new leader
// finds it at its own start: counted from there, leaders moving more often
// than the grace period would keep the swap waiting for good (soak seed
// 245). So the time is recorded on the pod (AnnotationCRRAPIGone, the
// earliest a replica found), and the wait counts from the earlier of the
// record and this replica's own: both are no earlier than the removal. A
// CRD removed, put back and removed again within one pod's stop counts from
// the first removal, unless this replica saw the API served in between (the
// record is then of the earlier loss): a replica that starts after the
// second removal and never saw the API back is outside the contract.
func stopsAfterCRD(in Input, c Container) (time.Time, bool) {
	since := crrAPIGoneSince(in)
	if in.CRRAPI || since.IsZero() || in.Node.Virtual || in.Node.Daemon != DaemonServes || c.State != StateRunning {
		return time.Time{}, false
	}
	until := since.Add(PodGrace(in.Pod) + stopMargin)
	return until, in.Now.Before(until)
}

// crrAPIGoneSince is the earliest time the CRR API is known not served, by
// this replica or the pod's record; zero while it is served.
func crrAPIGoneSince(in Input) time.Time {
	since := in.CRRAPIGoneSince
	if in.CRRAPI || since.IsZero() {
		return time.Time{}
	}
	if at, ok := crrAPIGoneRecord(in); ok && at.Before(since) {
		since = at
	}
	return since
}

// crrAPIGoneRecord is the pod's record of the CRR API's loss, unless this
// replica found the API served since.
func crrAPIGoneRecord(in Input) (time.Time, bool) {
	at, ok := crrAPIGoneMark(in.Pod)
	if !ok || at.Before(in.CRRAPIServedAt) {
		return time.Time{}, false
	}
	return at, true
}

// crrAPIGoneMark reads AnnotationCRRAPIGone; a malformed one reads as none.
func crrAPIGoneMark(pod *corev1.Pod) (time.Time, bool) {
	raw, ok := pod.Annotations[AnnotationCRRAPIGone]
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, raw)
	return at, err == nil
}

// CRRAPIGoneRecord is the AnnotationCRRAPIGone value for a time, rounded up
// to the second: never earlier than the time found.
func CRRAPIGoneRecord(at time.Time) string {
	return roundUpSecond(at).UTC().Format(time.RFC3339)
}

func roundUpSecond(at time.Time) time.Time {
	if r := at.Truncate(time.Second); r.Before(at) {
		return r.Add(time.Second)
	}
	return at
}

// recordAPIGone is the action that records on the pod when this replica
// found the CRR API gone, where the pod records no earlier time, unless the
// same record was refused and its backoff runs (or was given up on).
func recordAPIGone(in Input) (Action, bool) {
	if at, ok := crrAPIGoneRecord(in); ok && !at.After(roundUpSecond(in.CRRAPIGoneSince)) {
		return Action{}, false
	}
	if r := latestRefusal(in.Refusals, ActionRecordAPIGone, ""); r != nil {
		if wait, gaveUp := refusalWait(r, in.Policy, in.Now); gaveUp || wait > 0 {
			return Action{}, false
		}
	}
	return Action{Kind: ActionRecordAPIGone, Began: in.CRRAPIGoneSince}, true
}
