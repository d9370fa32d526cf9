package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A failed CRR whose retry waits its backoff is recorded on the pod (the
// attempts annotation) once: not when the pod already records it, and not
// when the retry is made at once (it records its own number as it is sent).
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
		{"past the backoff", "", time.Minute, "", true},
	} {
		p := Decide(Input{Pod: pod(tc.recorded), Node: normal, CRRAPI: true, Now: failed.Completed.Add(tc.after), Policy: DefaultPolicy(), CRRs: []CRR{failed}})
		retry := len(p.Actions) == 1 && p.Actions[0].Attempt == 2
		if p.RecordAttempts != tc.record || retry != tc.retry {
			t.Errorf("%s: record %q, actions %+v; want record %q, a retry %v", tc.name, p.RecordAttempts, p.Actions, tc.record, tc.retry)
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
