package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
)

func burstOf(name string, p99, rss float64) BurstResult {
	return BurstResult{Terminator: name, Pods: 10, P50: p99 / 4, P90: p99 / 2, P99: p99, Max: p99 + 1,
		AllSucceededSeconds: p99 + 2, CPUSecondsPer1000: p99 / 10, RSSBytesAfter: int64(rss * (1 << 20)), RSSBytesPeak: int64((rss + 5) * (1 << 20))}
}

// threeColumns is a two-round report with the controller, the yardstick and
// both OpenKruise columns.
func threeColumns() *Report {
	cfg := Config{BurstPods: 10, BackgroundPods: 100, IdleJobPods: 5, Rounds: 2, Workers: app.DefaultWorkers, QPS: app.ClientLimitOff,
		Burst: app.ClientLimitOff, Kruise: true, KruiseQPS: 1000, KruiseBurst: 2000}
	settings := cfg.kruiseSettings()
	r := &Report{Date: "2026-11-23T09:00:00Z", Machine: "2 cores", Config: cfg, WritesPerPod: 1, WriteKinds: []string{"create containerrecreaterequests 201 ×10"},
		ControllerRSSInitial: 20 << 20, YardstickRSSInitial: 30 << 20, YardstickWritesPerPod: 1}
	for _, s := range settings {
		r.Kruise = append(r.Kruise, KruiseColumn{Setting: s, Terminator: s.Name(), RSSInitial: 300 << 20, WritesPerPod: 1.5,
			WriteKinds: []string{"update pods 200 ×5"}})
	}
	for i, f := range []float64{1, 3} {
		r.Rounds = append(r.Rounds, Round{
			Controller: burstOf("sidecar-terminator", f, 25),
			Yardstick:  burstOf("yardstick", f/2, 35),
			Kruise:     []BurstResult{burstOf(settings[0].Name(), 10*f, 400), burstOf(settings[1].Name(), 4*f, 410)},
			P99Ratio:   2,
		})
		r.Rounds[i].Kruise[0].NotActedOn = i + 1
	}
	r.P99Ratio, r.Kruise[0].P99Ratio, r.Kruise[1].P99Ratio = 2, 0.1, 0.25
	return r
}

func TestMarkdownHasThreeTerminators(t *testing.T) {
	md := threeColumns().Markdown()
	for _, want := range []string{
		// the summary: each figure the median of its two rounds
		"| sidecar-terminator | 0.50s | 1.00s | 2.00s | 3.00s | 4.0s | 0 | 1.00 | 20.0 MiB | 25.0 MiB | 30.0 MiB | 0.20 |",
		"| yardstick | 0.25s | 0.50s | 1.00s | 2.00s | 3.0s | 0 | 1.00 | 30.0 MiB | 35.0 MiB | 40.0 MiB | 0.10 |",
		"| OpenKruise v1.9.1, as shipped (QPS 30) | 5.00s | 10.00s | 20.00s | 21.00s | 22.0s | 3 | 1.50 | 300.0 MiB | 400.0 MiB | 405.0 MiB | 2.00 |",
		"| OpenKruise v1.9.1, QPS 1000 | 2.00s | 4.00s | 8.00s | 9.00s | 10.0s | 0 | 1.50 | 300.0 MiB | 410.0 MiB | 415.0 MiB | 0.80 |",
		// every burst
		"| 2 | OpenKruise v1.9.1, as shipped (QPS 30) | 7.50s | 15.00s | 30.00s | 31.00s | 32.0s | 0.0s | 2 | 3.00 | 400.0 MiB |",
		"- p99 latency, controller / OpenKruise v1.9.1, as shipped (QPS 30): **0.10×** (median; rounds: 0.10×, 0.10×)",
		"- p99 latency, controller / OpenKruise v1.9.1, QPS 1000: **0.25×** (median; rounds: 0.25×, 0.25×)",
		"OpenKruise v1.9.1, QPS 1000 writes per terminated pod", "**1.50** (update pods 200 ×5)",
		fmt.Sprintf("the controller and the yardstick with %d workers and no client-side rate limiter (the controller's shipped defaults)", app.DefaultWorkers),
		"at client QPS 30, burst 50 (as OpenKruise ships it) and at client QPS 1000, burst 2000",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestMarkdownWithoutKruise(t *testing.T) {
	r := threeColumns()
	r.Config.Kruise, r.Kruise = false, nil
	for i := range r.Rounds {
		r.Rounds[i].Kruise = nil
	}
	md := r.Markdown()
	if strings.Contains(md, "OpenKruise") {
		t.Errorf("a run without -kruise names OpenKruise:\n%s", md)
	}
	if !strings.Contains(md, "| sidecar-terminator |") || !strings.Contains(md, "| yardstick |") {
		t.Errorf("summary lacks the two terminators:\n%s", md)
	}
}

// TestReportJSONCarriesKruise: the results file holds kruise's columns and
// each round's kruise bursts.
func TestReportJSONCarriesKruise(t *testing.T) {
	j, err := json.Marshal(threeColumns())
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Config struct{ Kruise bool }
		Kruise []struct {
			Terminator   string
			Setting      struct{ QPS, Burst int }
			WritesPerPod float64
			RSSInitial   int64
		}
		Rounds []struct{ Kruise []struct{ Terminator string } }
	}
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Config.Kruise || len(back.Kruise) != 2 || back.Kruise[0].Setting.QPS != KruiseShippedQPS || back.Kruise[1].Setting.QPS != 1000 ||
		back.Kruise[1].WritesPerPod != 1.5 || back.Kruise[0].RSSInitial != 300<<20 {
		t.Errorf("kruise columns in JSON: %+v", back.Kruise)
	}
	if len(back.Rounds) != 2 || len(back.Rounds[1].Kruise) != 2 || back.Rounds[1].Kruise[1].Terminator != back.Kruise[1].Terminator {
		t.Errorf("rounds in JSON: %+v", back.Rounds)
	}
}

func TestMedianResult(t *testing.T) {
	m := medianResult([]BurstResult{burstOf("x", 1, 10), burstOf("x", 5, 30), burstOf("x", 2, 20)})
	if m.P99 != 2 || m.RSSBytesAfter != 20<<20 || m.Terminator != "x" {
		t.Errorf("median %+v", m)
	}
	if !reflect.DeepEqual(medianResult(nil), BurstResult{}) { // BurstResult holds a slice: no ==
		t.Error("no rounds: not empty")
	}
}

// The worst round is the one with the highest ratio, not the last or the
// median: the bound holds in every round.
func TestWorstRound(t *testing.T) {
	r := &Report{Rounds: []Round{{P99Ratio: 1.05}, {P99Ratio: 3.46}, {P99Ratio: 2.27}}}
	if w, ok := r.worstRound(); !ok || w != 1 {
		t.Errorf("worst round %d (%v), want 1", w, ok)
	}
	if _, ok := (&Report{}).worstRound(); ok {
		t.Error("a report without rounds has a worst round")
	}
}

func TestTheReportNamesTheYardsticksOwnWorkersWhenTheyDiffer(t *testing.T) {
	same := Config{Workers: 64, QPS: -1}.settings()
	if !strings.Contains(same, "the controller and the yardstick with 64 workers") {
		t.Errorf("same workers: %q", same)
	}
	own := Config{Workers: 64, YardstickWorkers: 32, QPS: -1}.settings()
	if !strings.Contains(own, "the controller with 64 workers, the yardstick with 32") {
		t.Errorf("the yardstick's own workers: %q", own)
	}
}

func TestTheReportSaysWhereTheServersTimeWentInEachBurst(t *testing.T) {
	r := threeColumns()
	r.Rounds[1].ControllerServer = ServerStages{
		Queued:    []StageTime{{Name: "workload-low", Requests: 20000, MeanSeconds: 0.012}},
		Executing: []StageTime{{Name: "exempt", Requests: 20000, MeanSeconds: 0.05}, {Name: "workload-low", Requests: 20000, MeanSeconds: 0.1}},
		Filters:   []StageTime{{Name: "authentication", Requests: 40000, MeanSeconds: 0.0004}},
		Admission: []StageTime{{Name: "LimitRanger", Requests: 10000, MeanSeconds: 0.00001}, {Name: "PodSecurity", Requests: 10000, MeanSeconds: 0.001}},
		Etcd:      []StageTime{{Name: "update", Requests: 30000, MeanSeconds: 0.02}},
	}
	r.Rounds[1].YardstickServer = ServerStages{Queued: []StageTime{{Name: "exempt", Requests: 20000}}}
	md := r.Markdown()
	for _, want := range []string{
		"- round 2, the API server's Priority and Fairness queues (by priority level; the controller is a service account, the yardstick and the bench system:masters): during the controller's burst workload-low 20000 requests, mean 12.0 ms queued; during the yardstick's exempt 20000 requests, mean 0.0 ms queued\n",
		"- round 2, the API server's time from Priority and Fairness's queue to the answer (by priority level, every client): during the controller's burst exempt 20000 requests, mean 50.0 ms executing; workload-low 20000 requests, mean 100.0 ms executing; during the yardstick's none\n",
		"- round 2, the API server's handler filters' own time (by filter, every client): during the controller's burst authentication 40000 requests, mean 0.4 ms in the filter; during the yardstick's none\n",
		"- round 2, the API server's admission plugins that took 0.1 ms or more (by plugin, every client): during the controller's burst PodSecurity 10000 requests, mean 1.0 ms admitting; during the yardstick's none\n",
		"- round 2, the API server's requests to etcd (by operation, every client): during the controller's burst update 30000 requests, mean 20.0 ms at etcd; during the yardstick's none\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "- round 1, the API server's") {
		t.Errorf("a round without the server's times read reports them:\n%s", md)
	}
}

func TestTheReportSaysWhatEachBurstCostTheControlPlane(t *testing.T) {
	r := threeColumns()
	r.Rounds[1].Controller.ServerCPUSeconds = map[string]float64{"kube-apiserver": 0.098, "etcd": 0.012}
	r.Rounds[1].Yardstick.ServerCPUSeconds = map[string]float64{"kube-apiserver": 0.05, "etcd": 0.01}
	md := r.Markdown()
	want := "- round 2, the control plane's CPU s / 1000 pods over each burst (the same span as the terminator's): during sidecar-terminator's etcd 1.20, kube-apiserver 9.80; during yardstick's etcd 1.00, kube-apiserver 5.00\n"
	if !strings.Contains(md, want) {
		t.Errorf("report lacks %q:\n%s", want, md)
	}
	if strings.Contains(md, "- round 1, the control plane's CPU") {
		t.Errorf("a round without the server's CPU read reports it:\n%s", md)
	}
}

func TestTheReportSaysHowBusyTheMachineWasInEachBurst(t *testing.T) {
	r := threeColumns()
	c := &r.Rounds[0].Controller
	c.CPUSeconds = 72
	c.ServerCPUSeconds = map[string]float64{"kube-apiserver": 432, "etcd": 84}
	c.Machine = machineCPU{Seconds: 400, Busy: 740, Bench: 120, Cores: 2}
	y := &r.Rounds[0].Yardstick
	y.CPUSeconds = 44
	y.Machine = machineCPU{Seconds: 400, Busy: 600, Bench: 100, Cores: 2}
	md := r.Markdown()
	// The rest is what no named process spent: 740 - 72 - 432 - 84 - 120.
	want := "- round 1, the machine's cores busy over each burst (on average, of 2): " +
		"during sidecar-terminator's 1.85 (the terminator 0.18, etcd 0.21, kube-apiserver 1.08, the bench 0.30, the rest 0.08); " +
		"during yardstick's 1.50 (the terminator 0.11, the bench 0.25, the rest 1.14)\n"
	if !strings.Contains(md, want) {
		t.Errorf("report lacks %q:\n%s", want, md)
	}
	if strings.Contains(md, "- round 2, the machine's cores") {
		t.Errorf("a round without the machine's CPU read reports it:\n%s", md)
	}
}

func TestTheReportSaysHowTheExitsWereWritten(t *testing.T) {
	if s := (Config{Workers: 64, QPS: -1, ExitsPerSecond: 100}).settings(); !strings.Contains(s, "the mains' exits paced at 100 a second for every terminator") {
		t.Errorf("paced: %q", s)
	}
	if s := (Config{Workers: 64, QPS: -1}).settings(); !strings.Contains(s, "as fast as the API server takes them (64 writers)") {
		t.Errorf("unpaced: %q", s)
	}
}

func TestTheReportSaysWhichTerminatorOpenedTheFirstRound(t *testing.T) {
	if s := (Config{Workers: 64, QPS: -1, RotateBy: 1}).settings(); !strings.Contains(s, "; round 1 starts with the yardstick (-rotate-by=1)") {
		t.Errorf("rotated by one: %q", s)
	}
	if s := (Config{Workers: 64, QPS: -1, RotateBy: 2}).settings(); !strings.Contains(s, "; round 1 starts with the controller (-rotate-by=2)") {
		t.Errorf("rotated by two, without OpenKruise: %q", s)
	}
	if s := (Config{Workers: 64, QPS: -1}).settings(); strings.Contains(s, "round 1 starts") {
		t.Errorf("not rotated: %q", s)
	}
}

func TestTheReportSaysWhenTheControllerRanAsSystemMasters(t *testing.T) {
	s := (Config{Workers: 64, QPS: -1, ControllerAsMasters: true}).settings()
	if !strings.Contains(s, "the controller authenticated as system:masters (a diagnostic) (NOT the controller's shipped defaults)") {
		t.Errorf("as system:masters: %q", s)
	}
	if s := (Config{Workers: 64, QPS: -1}).settings(); strings.Contains(s, "system:masters") || !strings.Contains(s, "(the controller's shipped defaults)") {
		t.Errorf("as shipped: %q", s)
	}
}

// A burst both terminators shared is said once: the machine's cores with
// each terminator's share by name, and the control plane's CPU over all the
// burst's pods.
func TestTheReportSaysWhatASharedBurstCostOnce(t *testing.T) {
	r := threeColumns()
	r.Config.SideBySide = true
	first := time.Unix(1000, 0)
	servers := map[string]float64{"kube-apiserver": 432, "etcd": 84}
	machine := machineCPU{Seconds: 400, Busy: 740, Bench: 120, Cores: 2}
	c, y := &r.Rounds[0].Controller, &r.Rounds[0].Yardstick
	c.FirstExit, c.CPUSeconds, c.ServerCPUSeconds, c.Machine, c.Pods = first, 72, servers, machine, 10000
	y.FirstExit, y.CPUSeconds, y.ServerCPUSeconds, y.Machine, y.Pods = first, 44, servers, machine, 10000
	md := r.Markdown()
	// The rest is what no named process spent: 740 - 72 - 44 - 432 - 84 - 120.
	for _, want := range []string{
		"one burst of 10 pods the controller and the yardstick run through side by side",
		"- round 1, the machine's cores busy over each burst (on average, of 2): " +
			"during the burst sidecar-terminator and yardstick shared 1.85 (sidecar-terminator 0.18, yardstick 0.11, etcd 0.21, kube-apiserver 1.08, the bench 0.30, the rest 0.00)\n",
		// 432 s over 20,000 pods: 21.60 a thousand.
		"during the burst sidecar-terminator and yardstick shared etcd 4.20, kube-apiserver 21.60\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// The CPU ratio pairs the two terminators within each round, as the p99
// ratio does, and also totals their CPU over the rounds: a round where the
// yardstick collected its cache weighs as one of three in the median, and
// in the total by its seconds.
func TestTheCPURatioPairsEachRoundAndTotalsTheRounds(t *testing.T) {
	round := func(controller, yardstick float64) Round {
		return Round{Controller: BurstResult{Pods: 1000, CPUSeconds: controller, CPUSecondsPer1000: controller},
			Yardstick: BurstResult{Pods: 1000, CPUSeconds: yardstick, CPUSecondsPer1000: yardstick}}
	}
	r := &Report{Rounds: []Round{round(2, 1), round(2, 2), round(3, 2)}}
	r.pairCPU()
	if r.CPURatio != 1.5 || math.Abs(r.CPURatioTotal-1.4) > 1e-9 {
		t.Errorf("CPU ratio %v, over the totals %v; want the median 1.5 and 7/5", r.CPURatio, r.CPURatioTotal)
	}
	if got := []float64{r.Rounds[0].CPURatio, r.Rounds[1].CPURatio, r.Rounds[2].CPURatio}; !reflect.DeepEqual(got, []float64{2, 1, 1.5}) {
		t.Errorf("the rounds' ratios %v", got)
	}
	md := r.Markdown()
	if want := "- CPU s / 1000 pods, controller / yardstick: **1.50×** (median; rounds: 2.00×, 1.00×, 1.50×); all rounds' CPU together: 1.40×"; !strings.Contains(md, want) {
		t.Errorf("the report does not say %q:\n%s", want, md)
	}
	none := &Report{Rounds: []Round{{Controller: BurstResult{Pods: 10, CPUSeconds: 1, CPUSecondsPer1000: 100}}}}
	if none.pairCPU(); none.CPURatio != 0 || strings.Contains(none.Markdown(), "CPU s / 1000 pods, controller / yardstick") {
		t.Errorf("with no yardstick's CPU: ratio %v, or a line for it", none.CPURatio)
	}
}
