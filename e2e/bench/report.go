package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// WriteFiles writes the report as JSON and as a Markdown table, and the
// per-pod latencies to latencies.json (e2e/bench/plot draws them).
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteJSON(filepath.Join(dir, "latest.json"), r); err != nil {
		return err
	}
	if err := WriteLatencies(filepath.Join(dir, "latencies.json"), r.LatencyFile()); err != nil {
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

// Markdown renders the report's tables.
func (r *Report) Markdown() string {
	var b strings.Builder
	bursts := fmt.Sprintf("a burst of %d pods (half CRR, half image swap) for each terminator, rotating which goes first", r.Config.BurstPods)
	if r.Config.SideBySide {
		bursts = fmt.Sprintf("one burst of %d pods the controller and the yardstick run through side by side, each acting on its own half (half CRR, half image swap), their exits interleaved", r.Config.BurstPods)
	}
	fmt.Fprintf(&b, "Run %s on %s: %d rounds of %s; %d background pods, %d idle Job pods; %s.\n\n",
		r.Date, r.Machine, len(r.Rounds), bursts, r.Config.BackgroundPods, r.Config.IdleJobPods, r.Config.settings())
	b.WriteString(r.summary())
	fmt.Fprintf(&b, "\nEvery burst:\n\n| round | terminator | p50 | p90 | p99 | max | all Succeeded | mains' exits written in | not acted on | CPU s / 1000 pods | RSS after burst | peak RSS |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, round := range r.Rounds {
		for _, x := range round.bursts() {
			fmt.Fprintf(&b, "| %d | %s | %.2fs | %.2fs | %.2fs | %.2fs | %.1fs | %.1fs | %d | %.2f | %s | %s |\n", i+1, x.Terminator, x.P50, x.P90, x.P99, x.Max,
				x.AllSucceededSeconds, x.ExitSpreadSeconds, x.NotActedOn, x.CPUSecondsPer1000, mib(x.RSSBytesAfter), mib(x.RSSBytesPeak))
		}
	}
	var ratios, cpuRatios, events []string
	for _, round := range r.Rounds {
		ratios = append(ratios, fmt.Sprintf("%.2f×", round.P99Ratio))
		cpuRatios = append(cpuRatios, fmt.Sprintf("%.2f×", round.CPURatio))
		events = append(events, fmt.Sprintf("%d (last %.0fs after the first exit)", round.Events, round.EventsSeconds))
	}
	fmt.Fprintf(&b, "\n- p99 latency, controller / yardstick: **%.2f×** (median; rounds: %s)\n", r.P99Ratio, strings.Join(ratios, ", "))
	if r.CPURatio > 0 {
		fmt.Fprintf(&b, "- CPU s / 1000 pods, controller / yardstick: **%.2f×** (median; rounds: %s); all rounds' CPU together: %.2f×\n",
			r.CPURatio, strings.Join(cpuRatios, ", "), r.CPURatioTotal)
	}
	if w, ok := r.worstRound(); ok {
		fmt.Fprintf(&b, "- worst round for the controller against the yardstick: round %d, p99 %.2fs / %.2fs = **%.2f×**, p50 %.2fs / %.2fs\n",
			w+1, r.Rounds[w].Controller.P99, r.Rounds[w].Yardstick.P99, r.Rounds[w].P99Ratio, r.Rounds[w].Controller.P50, r.Rounds[w].Yardstick.P50)
	}
	for i, k := range r.Kruise {
		var rs []string
		for _, round := range r.Rounds {
			if i < len(round.Kruise) && round.Kruise[i].P99 > 0 {
				rs = append(rs, fmt.Sprintf("%.2f×", round.Controller.P99/round.Kruise[i].P99))
			}
		}
		fmt.Fprintf(&b, "- p99 latency, controller / %s: **%.2f×** (median; rounds: %s)\n", k.Terminator, k.P99Ratio, strings.Join(rs, ", "))
	}
	fmt.Fprintf(&b, "- controller writes per terminated pod (audit log, events and leases aside): **%.2f** (%s)\n", r.WritesPerPod, strings.Join(r.WriteKinds, ", "))
	fmt.Fprintf(&b, "- yardstick writes per terminated pod (the same): **%.2f** (%s)\n", r.YardstickWritesPerPod, strings.Join(r.YardstickWriteKinds, ", "))
	if len(r.ServerTimes) > 0 {
		fmt.Fprintf(&b, "- the API server's time per request (audit log, from taking it in to answering, the whole run): controller %s; yardstick %s\n",
			strings.Join(r.ServerTimes, ", "), strings.Join(r.YardstickServerTimes, ", "))
	}
	for i, round := range r.Rounds {
		for _, h := range serverHistograms {
			c, y := *h.field(&round.ControllerServer), *h.field(&round.YardstickServer)
			if r.Config.SideBySide && c != nil {
				fmt.Fprintf(&b, "- round %d, the API server's %s: during the burst both shared %s\n", i+1, h.title, formatTimes(slowest(c, h.minMean), h.verb))
			} else if c != nil || y != nil {
				fmt.Fprintf(&b, "- round %d, the API server's %s: during the controller's burst %s; during the yardstick's %s\n",
					i+1, h.title, formatTimes(slowest(c, h.minMean), h.verb), formatTimes(slowest(y, h.minMean), h.verb))
			}
		}
	}
	for i, round := range r.Rounds {
		if s := eachBurst(round, func(g []BurstResult) (string, bool) { return serverCPU(g), len(g[0].ServerCPUSeconds) > 0 }); s != "" {
			fmt.Fprintf(&b, "- round %d, the control plane's CPU s / 1000 pods over each burst (the same span as the terminator's): %s\n", i+1, s)
		}
	}
	for i, round := range r.Rounds {
		if s := eachBurst(round, func(g []BurstResult) (string, bool) { return machineShare(g), g[0].Machine.Seconds > 0 }); s != "" {
			fmt.Fprintf(&b, "- round %d, the machine's cores busy over each burst (on average, of %d): %s\n", i+1, round.Controller.Machine.Cores, s)
		}
	}
	for _, k := range r.Kruise {
		fmt.Fprintf(&b, "- %s writes per terminated pod (audit log, events and leases aside, from its bursts' pods created until deleted): **%.2f** (%s)\n",
			k.Terminator, k.WritesPerPod, strings.Join(k.WriteKinds, ", "))
	}
	pods := r.Config.BurstPods
	if len(r.Rounds) > 0 && r.Rounds[0].Controller.Pods > 0 {
		pods = r.Rounds[0].Controller.Pods // its half of a shared burst
	}
	fmt.Fprintf(&b, "- SidecarTerminating events, of the controller's %d pods per burst: %s\n", pods, strings.Join(events, ", "))
	fmt.Fprintf(&b, "- controller memory with the background pods, after the initial list: RSS **%s**, Go heap %s; after its last burst: heap %s\n",
		mib(r.ControllerRSSInitial), mib(r.ControllerHeapInitial), mib(r.ControllerHeapAfter))
	var withEvents []string
	for _, round := range r.Rounds {
		withEvents = append(withEvents, fmt.Sprintf("%.2f", round.Controller.CPUWithEventsPer1000))
	}
	fmt.Fprintf(&b, "- controller CPU s / 1000 pods until every SidecarTerminating event was seen (its events wait while it is busy): %s\n",
		strings.Join(withEvents, ", "))
	fmt.Fprintf(&b, "- CPU with nothing to do, after the initial list: controller %.4f s per second, yardstick %.4f s per second\n",
		r.ControllerIdleCPU, r.YardstickIdleCPU)
	if len(r.Rounds) > 0 {
		fmt.Fprintf(&b, "- where the controller's time went during its first burst: %s\n", r.Rounds[0].Breakdown)
		for i, round := range r.Rounds {
			if round.ControllerMemory.RSSAnon > 0 {
				fmt.Fprintf(&b, "- round %d, the controller's memory at its burst's end: %s\n", i+1, round.ControllerMemory)
			}
		}
		last := r.Rounds[len(r.Rounds)-1]
		fmt.Fprintf(&b, "- yardstick RSS (untrimmed cache of every pod): %s after its initial list, %s after its last burst; controller / yardstick after the last bursts: **%.2f×**\n",
			mib(r.YardstickRSSInitial), mib(last.Yardstick.RSSBytesAfter), r.RSSRatioAfter)
	}
	for _, k := range r.Kruise {
		fmt.Fprintf(&b, "- %s: kruise-manager (every controller of it, with its SidecarTerminator gate on and %d workers for it, as shipped) RSS %s once its caches hold every pod\n",
			k.Terminator, kruiseWorkers, mib(k.RSSInitial))
	}
	return b.String()
}

// worstRound is the round whose controller p99 over the yardstick's is
// highest: the bound holds in every round, not only the median.
func (r *Report) worstRound() (int, bool) {
	w := -1
	for i, round := range r.Rounds {
		if round.P99Ratio > 0 && (w < 0 || round.P99Ratio > r.Rounds[w].P99Ratio) {
			w = i
		}
	}
	return w, w >= 0
}

// serverCPU is the control plane's CPU per 1,000 of a burst's pods, by
// process: "etcd 4.20, kube-apiserver 21.60". A shared burst (Config.
// SideBySide) is counted over all its pods, each terminator's included.
func serverCPU(group []BurstResult) string {
	x, pods := group[0], 0
	for _, g := range group {
		pods += g.Pods
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(x.ServerCPUSeconds)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, x.ServerCPUSeconds[name]*1000/float64(max(pods, 1))))
	}
	return strings.Join(parts, ", ")
}

// machineShare is how many of the machine's cores a burst kept busy on
// average, and whose they were: "1.85 (the terminator 0.18, etcd 0.21,
// kube-apiserver 1.08, the bench 0.30, the rest 0.08)", or with a shared
// burst's terminators each by name.
func machineShare(group []BurstResult) string {
	m := group[0].Machine
	per := func(s float64) string { return fmt.Sprintf("%.2f", s/m.Seconds) }
	var parts []string
	rest := m.Busy - m.Bench
	for _, x := range group {
		who := "the terminator"
		if len(group) > 1 {
			who = x.Terminator
		}
		parts = append(parts, who+" "+per(x.CPUSeconds))
		rest -= x.CPUSeconds
	}
	servers := group[0].ServerCPUSeconds
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		parts = append(parts, name+" "+per(servers[name]))
		rest -= servers[name]
	}
	parts = append(parts, "the bench "+per(m.Bench), "the rest "+per(max(rest, 0)))
	return fmt.Sprintf("%s (%s)", per(m.Busy), strings.Join(parts, ", "))
}

// eachBurst is what say gives for each of the round's bursts that has it,
// "during A's …; during B's …", or "" when none has. The terminators of a
// shared burst (Config.SideBySide: the same first exit) come as one group,
// "during the burst A and B shared …".
func eachBurst(round Round, say func(group []BurstResult) (string, bool)) string {
	var parts []string
	bursts := round.bursts()
	for i := 0; i < len(bursts); {
		j := i + 1
		for j < len(bursts) && !bursts[i].FirstExit.IsZero() && bursts[j].FirstExit.Equal(bursts[i].FirstExit) {
			j++
		}
		group := bursts[i:j]
		if s, ok := say(group); ok {
			if len(group) == 1 {
				parts = append(parts, fmt.Sprintf("during %s's %s", group[0].Terminator, s))
			} else {
				var names []string
				for _, g := range group {
					names = append(names, g.Terminator)
				}
				parts = append(parts, fmt.Sprintf("during the burst %s shared %s", strings.Join(names, " and "), s))
			}
		}
		i = j
	}
	return strings.Join(parts, "; ")
}

// bursts are the round's bursts in table order.
func (round Round) bursts() []BurstResult {
	return append([]BurstResult{round.Controller, round.Yardstick}, round.Kruise...)
}

// summary is one row per terminator: each figure's median over the rounds.
func (r *Report) summary() string {
	if len(r.Rounds) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Median over the rounds:\n\n| terminator | p50 | p90 | p99 | max | all Succeeded | not acted on (all rounds) | writes per pod | RSS after the initial list | RSS after last burst | peak RSS | CPU s / 1000 pods |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	n := len(r.Rounds[0].bursts())
	for i := 0; i < n; i++ {
		var rs []BurstResult
		for _, round := range r.Rounds {
			if bs := round.bursts(); i < len(bs) {
				rs = append(rs, bs[i])
			}
		}
		m := medianResult(rs)
		writes, rss := "", int64(0)
		switch {
		case i == 0:
			writes, rss = fmt.Sprintf("%.2f", r.WritesPerPod), r.ControllerRSSInitial
		case i == 1:
			writes, rss = fmt.Sprintf("%.2f", r.YardstickWritesPerPod), r.YardstickRSSInitial
		case i-2 < len(r.Kruise):
			writes, rss = fmt.Sprintf("%.2f", r.Kruise[i-2].WritesPerPod), r.Kruise[i-2].RSSInitial
		}
		fmt.Fprintf(&b, "| %s | %.2fs | %.2fs | %.2fs | %.2fs | %.1fs | %d | %s | %s | %s | %s | %.2f |\n", m.Terminator, m.P50, m.P90, m.P99, m.Max,
			m.AllSucceededSeconds, m.NotActedOn, writes, mib(rss), mib(m.RSSBytesAfter), mib(m.RSSBytesPeak), m.CPUSecondsPer1000)
	}
	return b.String()
}

// medianResult is each figure's median over rs, with NotActedOn summed.
func medianResult(rs []BurstResult) BurstResult {
	if len(rs) == 0 {
		return BurstResult{}
	}
	med := func(f func(BurstResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, x := range rs {
			v[i] = f(x)
		}
		sort.Float64s(v)
		return median(v)
	}
	out := BurstResult{Terminator: rs[0].Terminator, Pods: rs[0].Pods,
		P50: med(func(x BurstResult) float64 { return x.P50 }), P90: med(func(x BurstResult) float64 { return x.P90 }),
		P99: med(func(x BurstResult) float64 { return x.P99 }), Max: med(func(x BurstResult) float64 { return x.Max }),
		AllSucceededSeconds: med(func(x BurstResult) float64 { return x.AllSucceededSeconds }),
		CPUSecondsPer1000:   med(func(x BurstResult) float64 { return x.CPUSecondsPer1000 }),
		RSSBytesAfter:       int64(med(func(x BurstResult) float64 { return float64(x.RSSBytesAfter) })),
		RSSBytesPeak:        int64(med(func(x BurstResult) float64 { return float64(x.RSSBytesPeak) })),
	}
	for _, x := range rs {
		out.NotActedOn += x.NotActedOn
	}
	return out
}

// settings says how the terminators were run, and whether that is how the
// controller ships.
// firstInRoundOne names the terminator whose burst opens round 1 (Run's
// order: the controller, the yardstick, then OpenKruise's settings).
func (c Config) firstInRoundOne() string {
	names := []string{"the controller", "the yardstick"}
	for _, k := range c.kruiseSettings() {
		names = append(names, k.Name())
	}
	return names[rotation(len(names), c.RotateBy)[0]]
}

func (c Config) settings() string {
	limit := "no client-side rate limiter"
	if c.QPS > 0 {
		limit = fmt.Sprintf("client QPS %g, burst %d", c.QPS, c.Burst)
	}
	s := fmt.Sprintf("the controller and the yardstick with %d workers and %s", c.Workers, limit)
	if y := c.yardstickWorkers(); y != c.Workers {
		s = fmt.Sprintf("the controller with %d workers, the yardstick with %d (its better setting here), both with %s", c.Workers, y, limit)
	}
	if c.ControllerAsMasters {
		s += ", the controller authenticated as system:masters (a diagnostic)"
	}
	if c.Workers == app.DefaultWorkers && c.QPS < 0 && !c.ControllerAsMasters {
		s += " (the controller's shipped defaults)"
	} else {
		s += " (NOT the controller's shipped defaults)"
	}
	if c.RotateBy != 0 {
		s += fmt.Sprintf("; round 1 starts with %s (-rotate-by=%d)", c.firstInRoundOne(), c.RotateBy)
	}
	if c.ExitsPerSecond > 0 {
		s += fmt.Sprintf("; the mains' exits paced at %g a second for every terminator", c.ExitsPerSecond)
	} else {
		s += fmt.Sprintf("; the mains' exits written as fast as the API server takes them (%d writers)", exitWriters)
	}
	for i, k := range c.kruiseSettings() {
		if i == 0 {
			s += fmt.Sprintf("; OpenKruise %s's SidecarTerminator (kruise-manager, gate on, its %d workers)", cluster.KruiseVersion, kruiseWorkers)
		} else {
			s += " and"
		}
		s += fmt.Sprintf(" at client QPS %d, burst %d", k.QPS, k.Burst)
		if k.Shipped() {
			s += " (as OpenKruise ships it)"
		}
	}
	return s
}
