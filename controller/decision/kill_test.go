package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// recordIn is the attempt the plan records on the pod ("" for none).
func recordIn(p Plan) string {
	for _, a := range p.Actions {
		if a.Kind == ActionRecordAttempt {
			return AttemptsMark(a.Stage, a.Attempt)
		}
	}
	return ""
}

// recorded is the record of a stage's attempt that began at began (zero: at
// the create before it).
func recorded(stage, attempt int, began time.Time) Action {
	return Action{Kind: ActionRecordAttempt, Stage: stage, Attempt: attempt, Began: began}
}

// stopsIn are the plan's actions but its record.
func stopsIn(p Plan) []Action {
	var out []Action
	for _, a := range p.Actions {
		if a.Kind != ActionRecordAttempt {
			out = append(out, a)
		}
	}
	return out
}

// A failed CRR whose retry waits its backoff is recorded on the pod (the
// attempts annotation) once: not when the pod already records it; a retry
// made at once is recorded after its create, never before.
func TestAFailedAttemptIsRecordedOnlyWhileTheRetryWaits(t *testing.T) {
	pod := func(recorded string) *corev1.Pod {
		b := podtest.Pod("p").UID("u").Container("main", exited(0)).Container("log", markCRR, podtest.Running())
		if recorded != "" {
			b = b.Annotate(AnnotationCRRAttempts, recorded)
		}
		return b.Build()
	}
	failed := CRR{Name: "p-u-st1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: exitAt, Completed: exitAt.Add(10 * time.Second),
		RestartCounts: map[string]int32{"log": 0}}
	for _, tc := range []struct {
		name     string
		recorded string
		after    time.Duration
		record   string
		retry    bool
	}{
		{"in the backoff", "", time.Second, "1", false},
		{"in the backoff, already recorded", "1", time.Second, "", false},
		{"past the backoff", "", time.Minute, "2", true},
	} {
		p := Decide(Input{Pod: pod(tc.recorded), Node: normal, CRRAPI: true, Now: failed.Completed.Add(tc.after), Policy: DefaultPolicy(), CRRs: []CRR{failed}})
		stops := stopsIn(p)
		retry := len(stops) == 1 && stops[0].Attempt == 2
		if recordIn(p) != tc.record || retry != tc.retry || (retry && p.Actions[0].Kind != ActionCreateCRR) {
			t.Errorf("%s: record %q, actions %+v; want record %q, a retry %v (created first)", tc.name, recordIn(p), p.Actions, tc.record, tc.retry)
		}
	}
}

// A sidecar still running under its CRR in flight, with the restart count
// the CRR recorded, is being stopped: it did not come back (only a restart
// since would say so), so the controller waits for the CRR.
func TestASidecarUnderItsCRRWithTheSameRestartCountIsBeingStopped(t *testing.T) {
	pod := podtest.Pod("p").UID("u").Container("main", exited(0)).Container("log", markCRR, podtest.Running(), podtest.Restarts(2)).Build()
	crr := CRR{Name: "p-u-st1", Attempt: 1, Containers: []string{"log"}, Phase: "Recreating", Created: exitAt.Add(time.Second), Deadline: time.Minute,
		RestartCounts: map[string]int32{"log": 2}}
	p := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: exitAt.Add(5 * time.Second), Policy: DefaultPolicy(), CRRs: []CRR{crr}})
	if len(p.Actions) != 0 || len(p.FailedKills) != 0 || !strings.Contains(p.Reason, "is being stopped by p-u-st1") {
		t.Errorf("actions %+v, failed kills %v, reason %q; want the CRR waited for", p.Actions, p.FailedKills, p.Reason)
	}
}
