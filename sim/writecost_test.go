package sim

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

// Every scenario's controller writes no faster than the real one was
// measured to: each API call holds the one worker measuredWriteCost, so no
// second of virtual time sees more than a second's worth of them, in a
// burst whose mains all end within a second. With API calls free the same
// burst is written in a fraction of a second.
func TestABurstIsWrittenNoFasterThanTheMeasuredWriteCost(t *testing.T) {
	sc := Scenario{Name: "write-pace", Purpose: "a burst of 1,000 mains ending within a second",
		Pods: 1000, Arrival: 100 * time.Millisecond, Nodes: normalNodes, Templates: []Template{
			never("pace", mainC("main", 10*time.Second, 10*time.Second), sidecar("proxy", "exit:0", markCRR))}}
	limit := int(time.Second / measuredWriteCost)
	for name, tc := range map[string]struct {
		opts Options
		over bool // the peak must pass the limit
	}{
		"the default":         {},
		"the writes are free": {opts: Options{FreeWrites: true}, over: true},
	} {
		t.Run(name, func(t *testing.T) {
			var trace strings.Builder
			tc.opts.TraceOut = &trace
			r := New(sc, 1, tc.opts).Run()
			if r.Violation != nil {
				t.Fatal(r.Violation)
			}
			peak, writes := peakWritesPerSecond(t, trace.String())
			if writes != sc.Pods {
				t.Fatalf("%d writes for %d pods, want one per pod", writes, sc.Pods)
			}
			if over := peak > limit; over != tc.over {
				t.Errorf("at most %d writes in one second of virtual time, limit %d (one a %s): over %v, want %v", peak, limit, measuredWriteCost, over, tc.over)
			}
			t.Logf("peak %d writes a second, p50 %s, p99 %s", peak, r.P50, r.P99)
		})
	}
}

// peakWritesPerSecond reads the controller's writes from a trace: the most
// that fall within one second, and how many there were.
func peakWritesPerSecond(t *testing.T, trace string) (int, int) {
	t.Helper()
	var at []time.Duration
	sc := bufio.NewScanner(strings.NewReader(trace))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "controller" || !strings.Contains(sc.Text(), " -> ") {
			continue
		}
		d, err := time.ParseDuration(fields[0])
		if err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		at = append(at, d)
	}
	peak := 0
	for i, j := 0, 0; j < len(at); j++ {
		for at[j]-at[i] >= time.Second {
			i++
		}
		peak = max(peak, j-i+1)
	}
	return peak, len(at)
}
