package decision

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The stop window. A stop is in flight from its send until the CRR's deadline
// plus the pod's grace period plus a margin: kruise-daemon may take a CRR up
// as late as its deadline, and its CRI stop then runs for up to the grace
// period whatever becomes of the CRR. No second stop of the same sidecar
// starts inside the window, whoever leads, and the objects carry it, not a
// replica's memory:
//
//   - every CRR lives at least until its window closes (CRRTTL, written as
//     its ttlSecondsAfterFinished, which kruise counts from its finish);
//   - a CRR of ours is deleted only once its window has closed, or once
//     every sidecar it stops has terminated (clearEarlierCRRs);
//   - a retry's attempt, its stage and when it began are recorded on the pod
//     (AnnotationCRRAttempts, ActionRecordAttempt) after its create
//     succeeded, by compare-and-swap on the value read, so that the window
//     of an attempt whose CRR is gone is still known (kill's stand-in).
//
// What this does not cover: a third party deleting a first attempt's CRR
// inside its window, and leadership moving in that window to a replica that
// never saw the CRR. Nothing then records that a stop began; the new leader
// makes the first attempt again under the freed name, and the sidecar gets a
// second SIGTERM while it drains. A replica that saw the CRR remembers it
// (as last seen) and waits.

// StopWindow is how long after a CRR's creation a stop it asked for may
// still be under way.
func StopWindow(pod *corev1.Pod, p Policy) time.Duration {
	return CRRDeadline(pod, p) + PodGrace(pod) + stopMargin
}

// CRRTTL is the ttlSecondsAfterFinished for the pod's CRRs: the operator's
// setting, raised to the stop window where that is longer. kruise counts it
// from the CRR's finish, which is no earlier than its creation, so the CRR
// outlives its window.
func CRRTTL(pod *corev1.Pod, p Policy, setting time.Duration) time.Duration {
	return max(setting, StopWindow(pod, p))
}

// windowEnd is when the stop the CRR asked for can no longer be under way.
func (c CRR) windowEnd(in Input) time.Time {
	return c.deadlineAt(in).Add(PodGrace(in.Pod) + stopMargin)
}

// windowClosed reports whether the CRR may be deleted: its window has passed,
// or every container it stops has terminated (the stop is over; one that
// comes back is stopped afresh).
func (c CRR) windowClosed(in Input, terminated func(string) bool) bool {
	if !in.Now.Before(c.windowEnd(in)) {
		return true
	}
	for _, name := range c.Containers {
		if !terminated(name) {
			return false
		}
	}
	return len(c.Containers) > 0
}

// attemptRecord reads AnnotationCRRAttempts for a stop-order stage: the
// attempt recorded and when it began; zero when absent, unusable, or
// recorded for another stage. A value written before the record carried a
// time reads with a zero time.
func attemptRecord(pod *corev1.Pod, stage int) (int, time.Time) {
	raw, at, _ := strings.Cut(pod.Annotations[AnnotationCRRAttempts], " ")
	recordedStage := 0
	if s, n, ok := strings.Cut(raw, ":"); ok {
		var err error
		if recordedStage, err = strconv.Atoi(s); err != nil {
			return 0, time.Time{}
		}
		raw = n
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || recordedStage != stage {
		return 0, time.Time{}
	}
	began, err := time.Parse(time.RFC3339, at)
	if err != nil {
		began = time.Time{}
	}
	return n, began
}

// recordedAttempts is the attempt AnnotationCRRAttempts records for a stage.
func recordedAttempts(pod *corev1.Pod, stage int) int {
	n, _ := attemptRecord(pod, stage)
	return n
}

// AttemptsMark names a CRR attempt of a stop-order stage: the bare number for
// stage 0 (every pod without an order), "<stage>:<attempt>" for later
// stages, so that each stage counts its own attempts. A stage never comes
// back once a later one began, so one record per pod is enough.
func AttemptsMark(stage, attempt int) string {
	if stage == 0 {
		return strconv.Itoa(attempt)
	}
	return strconv.Itoa(stage) + ":" + strconv.Itoa(attempt)
}

// AttemptRecord is the AnnotationCRRAttempts value for an attempt that began
// at began: its mark and the time, rounded up to the second so that the
// window counted from it is never shorter than kruise's.
func AttemptRecord(stage, attempt int, began time.Time) string {
	if r := began.Truncate(time.Second); r.Before(began) {
		began = r.Add(time.Second)
	}
	return AttemptsMark(stage, attempt) + " " + began.UTC().Format(time.RFC3339)
}

// recordAttempt is the action that records a CRR attempt on the pod (began
// zero: when the create before it in the plan was answered), unless the pod
// records it already or the same record was refused and its backoff runs
// (or was given up on: the record bounds retries, it is no precondition of
// a kill).
func recordAttempt(in Input, stage, attempt int, began time.Time) (Action, bool) {
	if recordedAttempts(in.Pod, stage) >= attempt {
		return Action{}, false
	}
	a := Action{Kind: ActionRecordAttempt, Stage: stage, Attempt: attempt, Began: began}
	if r := latestRefusal(in.Refusals, ActionRecordAttempt, ""); r != nil && r.Attempt == attempt {
		if wait, gaveUp := refusalWait(r, in.Policy, in.Now); gaveUp || wait > 0 {
			return Action{}, false
		}
	}
	return a, true
}

// AttemptRecorded reports whether the pod records that attempt of the stage
// (or a later one).
func AttemptRecorded(pod *corev1.Pod, stage, attempt int) bool {
	return recordedAttempts(pod, stage) >= attempt
}

// clearEarlierCRRs returns the deletions of earlier stages' unfinished CRRs
// that go before a stage's CRR; and, for each one whose deletion was refused
// and that is still in flight, why the stage's CRR waits (it sets the plan's
// when to look again). A CRR created beside it would wait in
// kruise-daemon behind it while its own deadline runs (kruise-manager counts
// activeDeadlineSeconds from the CRR's creation:
// pkg/controller/containerrecreaterequest/crr_controller.go), so the stage's
// CRR is made only once the earlier one is deleted or past its deadline,
// when kruise-manager completes it. A refused deletion is sent again when its
// backoff has passed; one given up on (an RBAC or policy without it) leaves
// the wait to the earlier CRR's deadline: slower, still bounded.
//
// This is the one place that deletes a CRR of ours, and it keeps the stop
// window (window.go): a CRR whose window is open and whose containers still
// run is not deleted; the stage's CRR waits for its window to close.
func clearEarlierCRRs(in Input, stage int, containers []Container) (deletes []Action, wait []string, next time.Time) {
	terminated := func(name string) bool {
		for _, c := range containers {
			if c.Name == name {
				return c.State == StateTerminated
			}
		}
		return false
	}
	for _, c := range in.CRRs {
		if c.Stage >= stage || c.Finished() {
			continue
		}
		if !c.windowClosed(in, terminated) {
			until := c.windowEnd(in)
			if next.IsZero() || until.Before(next) {
				next = until
			}
			wait = append(wait, fmt.Sprintf("%s of stage %d may still be stopping %v until %s", c.Name, c.Stage, c.Containers, until.UTC().Format(time.RFC3339)))
			continue
		}
		r := crrRefusal(in.Refusals, ActionDeleteCRR, c.Name)
		retry, gaveUp := refusalWait(r, in.Policy, in.Now)
		if r == nil || (!gaveUp && retry <= 0) {
			deletes = append(deletes, Action{Kind: ActionDeleteCRR, CRRName: c.Name, Containers: c.Containers, Stage: c.Stage})
			continue
		}
		deadline := c.deadlineAt(in)
		if !in.Now.Before(deadline) {
			continue
		}
		until := deadline.Add(time.Second)
		if !gaveUp && in.Now.Add(retry).Before(until) {
			until = in.Now.Add(retry)
		}
		if next.IsZero() || until.Before(next) {
			next = until
		}
		wait = append(wait, fmt.Sprintf("deleting %s of stage %d was refused (%s) and it is in flight until %s; looked at again at %s",
			c.Name, c.Stage, r.Describe(), deadline.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)))
	}
	return deletes, wait, next
}
