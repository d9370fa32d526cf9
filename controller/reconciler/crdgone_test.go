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
// (10 s) from its first look; a restart counts from its own first look,
// and the API served again forgets the loss.
func TestAControllerStartingAfterTheCRDWentSwapsAfterAGracePeriod(t *testing.T) {
	f := newFixture(jobPod(markCRR, markImage))
	f.w.crrAPI = false
	start := func() {
		f.rec = reconciler.New(reconciler.DefaultConfig(), daemonWorld{f.w}, f.w, f.ev, f.metrics, f.clock)
	}
	start()
	first := f.clock.Now()
	if after := f.sync(t); len(f.w.sent) != 0 || after != 40*time.Second {
		t.Fatalf("first look: writes %v, requeue %s; want none, 40s", f.w.sent, after)
	}
	f.clock.SetTime(first.Add(20 * time.Second))
	start() // a restart half-way: its own first look counts
	if after := f.sync(t); len(f.w.sent) != 0 || after != 40*time.Second {
		t.Fatalf("after a restart: writes %v, requeue %s; want none, 40s", f.w.sent, after)
	}
	f.clock.SetTime(first.Add(59 * time.Second))
	if after := f.sync(t); len(f.w.sent) != 0 || after != time.Second {
		t.Fatalf("a second before: writes %v, requeue %s; want none, 1s", f.w.sent, after)
	}
	f.w.crrAPI = true // the CRD back for one look (a plan, nothing sent), then gone again
	if _, err := f.rec.Plan(f.w.pod, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.w.crrAPI = false
	f.clock.SetTime(first.Add(61 * time.Second))
	if after := f.sync(t); len(f.w.sent) != 0 || after != 40*time.Second {
		t.Fatalf("the API lost again: writes %v, requeue %s; want none, 40s", f.w.sent, after)
	}
	f.clock.SetTime(first.Add(101 * time.Second))
	f.sync(t)
	if strings.Join(f.w.sent, ",") != "swap" {
		t.Fatalf("after the wait: writes %v, want one swap", f.w.sent)
	}
}
