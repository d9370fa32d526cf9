package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// daemonWorld is a world whose nodes a kruise-daemon serves, as the
// NodeImages kruise-daemon writes would show.
type daemonWorld struct{ *world }

func (daemonWorld) KruiseDaemon(string, time.Time, time.Duration) (decision.DaemonState, string) {
	return decision.DaemonServes, "kruise-daemon wrote the node's NodeImage status"
}

// A controller that starts without the CRR API (its CRD removed before,
// soak seeds 405 and 460) remembers no CRR, so on a node kruise-daemon
// serves its first swap waits the pod's grace period (30 s) and a margin
// (10 s) from its first look, which it records on the pod. A restart, or a
// new leader, counts from that record, not from its own first look: leaders
// moving more often than the wait would otherwise keep the swap waiting for
// good (soak seed 245). The API served again makes the record one of an
// earlier loss: the next loss counts from its own first look, recorded anew.
func TestAControllerStartingAfterTheCRDWentSwapsAfterAGracePeriod(t *testing.T) {
	f := newFixture(jobPod(markCRR, markImage))
	f.w.crrAPI = false
	start := func() {
		f.rec = reconciler.New(reconciler.DefaultConfig(), daemonWorld{f.w}, f.w, f.w, f.ev, f.metrics, f.clock)
	}
	record := "annotate " + decision.AnnotationCRRAPIGone
	start()
	first := f.clock.Now()
	if after := f.sync(t); strings.Join(f.w.sent, ",") != record || after != 40*time.Second {
		t.Fatalf("first look: writes %v, requeue %s; want the record, 40s", f.w.sent, after)
	}
	f.w.pod.Annotations = map[string]string{decision.AnnotationCRRAPIGone: decision.CRRAPIGoneRecord(first)}
	f.w.sent = nil
	for i := 1; i <= 2; i++ {
		// A new leader every 15 s: each counts from the record.
		f.clock.SetTime(first.Add(time.Duration(i) * 15 * time.Second))
		start()
		if after := f.sync(t); len(f.w.sent) != 0 || after != 40*time.Second-time.Duration(i)*15*time.Second {
			t.Fatalf("leader %d: writes %v, requeue %s; want none, %s", i, f.w.sent, after, 40*time.Second-time.Duration(i)*15*time.Second)
		}
	}
	f.clock.SetTime(first.Add(39 * time.Second))
	if after := f.sync(t); len(f.w.sent) != 0 || after != time.Second {
		t.Fatalf("a second before: writes %v, requeue %s; want none, 1s", f.w.sent, after)
	}
	f.w.crrAPI = true // the CRD back for one look (a plan, nothing sent), then gone again
	if _, err := f.rec.Plan(f.w.pod, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.w.crrAPI = false
	f.clock.SetTime(first.Add(41 * time.Second))
	if after := f.sync(t); strings.Join(f.w.sent, ",") != record || after != 40*time.Second {
		t.Fatalf("the API lost again: writes %v, requeue %s; want the new record, 40s", f.w.sent, after)
	}
	f.w.pod.Annotations[decision.AnnotationCRRAPIGone] = decision.CRRAPIGoneRecord(first.Add(41 * time.Second))
	f.w.sent = nil
	f.clock.SetTime(first.Add(81 * time.Second))
	f.sync(t)
	if strings.Join(f.w.sent, ",") != "swap" {
		t.Fatalf("after the wait: writes %v, want one swap", f.w.sent)
	}
}
