package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
)

// WriteFiles writes the report as JSON and as a Markdown table.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteJSON(filepath.Join(dir, "latest.json"), r); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "latest.md"), []byte(r.Markdown()), 0o644)
}

// WriteJSON writes v, indented, to path.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(j, '\n'), 0o644)
}

// Markdown renders the report's table.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s on %s: %d rounds of a burst of %d pods (half CRR, half image swap) for each terminator, alternating which goes first; %d background pods, %d idle Job pods; %s.\n\n",
		r.Date, r.Machine, len(r.Rounds), r.Config.BurstPods, r.Config.BackgroundPods, r.Config.IdleJobPods, r.Config.settings())
	fmt.Fprintf(&b, "| round | terminator | p50 | p90 | p99 | max | all Succeeded | mains' exits written in | not acted on | CPU s / 1000 pods | RSS after burst |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, round := range r.Rounds {
		for _, x := range []BurstResult{round.Controller, round.Yardstick} {
			fmt.Fprintf(&b, "| %d | %s | %.2fs | %.2fs | %.2fs | %.2fs | %.1fs | %.1fs | %d | %.2f | %s |\n", i+1, x.Terminator, x.P50, x.P90, x.P99, x.Max,
				x.AllSucceededSeconds, x.ExitSpreadSeconds, x.NotActedOn, x.CPUSecondsPer1000, mib(x.RSSBytesAfter))
		}
	}
	var ratios, events []string
	for _, round := range r.Rounds {
		ratios = append(ratios, fmt.Sprintf("%.2f×", round.P99Ratio))
		events = append(events, fmt.Sprintf("%d (last %.0fs after the first exit)", round.Events, round.EventsSeconds))
	}
	fmt.Fprintf(&b, "\n- p99 latency, controller / yardstick: **%.2f×** (median; rounds: %s)\n", r.P99Ratio, strings.Join(ratios, ", "))
	fmt.Fprintf(&b, "- controller writes per terminated pod (audit log, events and leases aside): **%.2f** (%s)\n", r.WritesPerPod, strings.Join(r.WriteKinds, ", "))
	fmt.Fprintf(&b, "- SidecarTerminating events, of %d pods per burst: %s\n", r.Config.BurstPods, strings.Join(events, ", "))
	fmt.Fprintf(&b, "- controller memory with the background pods, after the initial list: RSS **%s**, Go heap %s; after its last burst: heap %s\n",
		mib(r.ControllerRSSInitial), mib(r.ControllerHeapInitial), mib(r.ControllerHeapAfter))
	fmt.Fprintf(&b, "- where the controller's time went during its first burst: %s\n", r.Rounds[0].Breakdown)
	last := r.Rounds[len(r.Rounds)-1]
	fmt.Fprintf(&b, "- yardstick RSS (untrimmed cache of every pod): %s after its initial list, %s after its last burst; controller / yardstick after the last bursts: **%.2f×**\n",
		mib(r.YardstickRSSInitial), mib(last.Yardstick.RSSBytesAfter), r.RSSRatioAfter)
	return b.String()
}

// settings says how both terminators were run, and whether that is how the
// controller ships.
func (c Config) settings() string {
	limit := "no client-side rate limiter"
	if c.QPS > 0 {
		limit = fmt.Sprintf("client QPS %g, burst %d", c.QPS, c.Burst)
	}
	s := fmt.Sprintf("both terminators with %d workers and %s", c.Workers, limit)
	if c.Workers == app.DefaultWorkers && c.QPS < 0 {
		s += " (the controller's shipped defaults)"
	} else {
		s += " (NOT the controller's shipped defaults)"
	}
	return s
}
