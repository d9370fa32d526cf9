package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// The breakdown is the difference of two scrapes: totals summed over their
// labels, the informer events and decisions kept per series.
func TestBreakdownFromTwoScrapes(t *testing.T) {
	scrapes := []string{`# HELP workqueue_adds_total x
workqueue_adds_total{name="sidecar-terminator"} 10
workqueue_work_duration_seconds_count{name="sidecar-terminator"} 8
workqueue_work_duration_seconds_sum{name="sidecar-terminator"} 0.8
sidecar_terminator_informer_events_total{event="update",kind="pod",result="queued"} 5
sidecar_terminator_informer_events_total{event="update",kind="pod",result="filtered"} 7
sidecar_terminator_decisions_total{verdict="Act"} 1
go_gc_duration_seconds_count 4
`, `workqueue_adds_total{name="sidecar-terminator"} 40
workqueue_work_duration_seconds_count{name="sidecar-terminator"} 38
workqueue_work_duration_seconds_sum{name="sidecar-terminator"} 3.8
sidecar_terminator_informer_events_total{event="update",kind="pod",result="queued"} 25
sidecar_terminator_informer_events_total{event="update",kind="pod",result="filtered"} 7
sidecar_terminator_informer_events_total{event="add",kind="crr",result="queued"} 3
sidecar_terminator_decisions_total{verdict="Act"} 11
sidecar_terminator_decisions_total{verdict="Done"} 2
go_gc_duration_seconds_count 9
`}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(scrapes[n]))
		n++
	}))
	defer srv.Close()
	ctl := &cluster.Controller{MetricsURL: srv.URL + "/metrics"}
	before, err := snapshot(context.Background(), ctl)
	if err != nil {
		t.Fatal(err)
	}
	after, err := snapshot(context.Background(), ctl)
	if err != nil {
		t.Fatal(err)
	}
	b := breakdown(before, after)
	if b.Syncs != 30 || b.Adds != 30 || b.MeanSync != 0.1 {
		t.Errorf("syncs %v, adds %v, mean sync %v; want 30, 30, 0.1", b.Syncs, b.Adds, b.MeanSync)
	}
	if diff := cmp.Diff(map[string]float64{"pod update queued": 20, "crr add queued": 3}, b.Events); diff != "" {
		t.Errorf("informer events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"Act": 10, "Done": 2}, b.Verdicts); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	if b.GCCycles != 5 || !strings.Contains(b.String(), "; 5 GC cycles") {
		t.Errorf("GC cycles %v in %q; want 5", b.GCCycles, b.String())
	}
}

// The scheduler's waits across a burst: how many, a mean, and the bucket
// that holds the 99th percentile of the waits counted between the scrapes
// (not of those counted before).
func TestTheBreakdownGivesTheSchedulersWaitsAcrossTheBurst(t *testing.T) {
	before := map[string]float64{
		"go_sched_latencies_seconds_count": 1000, "go_sched_latencies_seconds_sum": 1,
		`go_sched_latencies_seconds_bucket{le="0.001"}`: 1000,
		`go_sched_latencies_seconds_bucket{le="0.01"}`:  1000,
		`go_sched_latencies_seconds_bucket{le="0.1"}`:   1000,
		`go_sched_latencies_seconds_bucket{le="+Inf"}`:  1000,
	}
	after := map[string]float64{
		"go_sched_latencies_seconds_count": 2000, "go_sched_latencies_seconds_sum": 4,
		`go_sched_latencies_seconds_bucket{le="0.001"}`: 1500,
		`go_sched_latencies_seconds_bucket{le="0.01"}`:  1980,
		`go_sched_latencies_seconds_bucket{le="0.1"}`:   2000,
		`go_sched_latencies_seconds_bucket{le="+Inf"}`:  2000,
	}
	b := breakdown(before, after)
	if b.SchedWaits != 1000 || b.MeanSchedWait != 0.003 || b.SchedWaitP99 != 0.1 {
		t.Errorf("waits %v, mean %v, p99 %v; want 1000, 0.003, 0.1 (990 of the 1000 are not under 0.01)", b.SchedWaits, b.MeanSchedWait, b.SchedWaitP99)
	}
	after[`go_sched_latencies_seconds_bucket{le="0.01"}`] = 1990
	if got := breakdown(before, after).SchedWaitP99; got != 0.01 {
		t.Errorf("p99 with 990 of 1000 under 0.01: %v, want 0.01", got)
	}
	if !strings.Contains(b.String(), "p99 at most 100.0 ms") {
		t.Errorf("the breakdown does not give the p99: %s", b.String())
	}
}
