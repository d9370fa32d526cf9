package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Stats are counters kept during a run.
type Stats struct {
	applied map[string]int // writes that took effect, by method
	calls   map[string]int // write calls, by method
	syncs   int
	dropped int
	// liveReads are the controller's reads past its cache (LiveChecker).
	liveReads int
	// jobReads are the controller's live reads of a pod's Job (jobverdict.go).
	jobReads int
	// filtered counts updates dropped before the queue.
	filtered int
	// converted counts pods the native-sidecar webhook converted (admission.go).
	converted int
}

func newStats() *Stats { return &Stats{applied: map[string]int{}, calls: map[string]int{}} }

// apiCalls is how many calls the controllers made to the API server so far:
// writes and live reads.
func (s *Stats) apiCalls() int {
	n := s.liveReads + s.jobReads
	for _, c := range s.calls {
		n += c
	}
	return n
}

// Result is what one run reports.
type Result struct {
	Scenario string
	Seed     uint64
	Pods     int
	Virtual  time.Duration
	Wall     time.Duration
	Steps    uint64
	// MaxInstantSteps is the most steps taken at one virtual instant.
	MaxInstantSteps uint64
	Syncs           int
	LiveReads       int
	JobReads        int // live reads of a pod's owning Job
	Filtered        int // updates dropped before the queue
	Converted       int // pods converted to native sidecars at admission
	Applied         map[string]int
	Calls           map[string]int
	P50, P99        time.Duration
	Terminal        int
	Warned          int
	Gone            int
	Unsettled       int
	Hash            string
	Violation       *Violation
}

func (s *Sim) result(wall time.Duration) *Result {
	lat := append([]time.Duration(nil), s.check.latencies...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := &Result{Scenario: s.sc.Name, Seed: s.seed, Pods: s.sc.Pods, Virtual: s.now().Sub(Epoch), Wall: wall,
		Steps: s.step, MaxInstantSteps: s.maxInstant, Syncs: s.stats.syncs, LiveReads: s.stats.liveReads, JobReads: s.stats.jobReads, Filtered: s.stats.filtered, Converted: s.stats.converted, Applied: s.stats.applied, Calls: s.stats.calls,
		P50: percentile(lat, 0.5), P99: percentile(lat, 0.99), Unsettled: s.check.unsettled,
		Hash: s.trace.Sum(), Violation: s.check.violation}
	for _, e := range s.world.byUID {
		switch {
		case !e.truth.terminalAt.IsZero():
			r.Terminal++
		case e.truth.gone:
			r.Gone++
		case e.truth.warned:
			r.Warned++
		}
	}
	return r
}

// WriteTable prints results as the simulator's report table.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tSEED\tPODS\tVIRTUAL\tWALL\tACTIONS (crr/swap/settle)\tP50\tP99\tDONE/WARN/GONE\tVIOLATIONS\tTRACE")
	for _, r := range results {
		v := "0"
		if r.Violation != nil {
			v = "1 " + r.Violation.Kind
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d/%d/%d\t%s\t%s\t%d/%d/%d\t%s\t%s\n", r.Scenario, r.Seed, r.Pods,
			r.Virtual.Round(time.Second), r.Wall.Round(time.Millisecond),
			r.Applied[MethodCRR], r.Applied[MethodSwap], r.Applied[MethodSettle],
			fmtDur(r.P50), fmtDur(r.P99), r.Terminal, r.Warned, r.Gone, v, r.Hash[:12])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Violation != nil {
			fmt.Fprintf(w, "\n%s", r.Violation)
		}
	}
	return nil
}

// Summary is one line for sweeps.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s seed=%d pods=%d virtual=%s wall=%s steps=%d syncs=%d", r.Scenario, r.Seed, r.Pods, r.Virtual.Round(time.Second), r.Wall.Round(time.Millisecond), r.Steps, r.Syncs)
	if r.Violation != nil {
		fmt.Fprintf(&b, " VIOLATION %s", r.Violation.Kind)
	}
	return b.String()
}
