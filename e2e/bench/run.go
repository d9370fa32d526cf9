package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// Config sizes a run.
type Config struct {
	BurstPods      int
	BackgroundPods int // restartPolicy Always pods, out of the controller's cache by field selector
	IdleJobPods    int // Job pods whose mains keep running
	Rounds         int // bursts of each terminator
	Workers        int
	// ExitsPerSecond paces the mains' exits: the i-th is written no sooner
	// than i/ExitsPerSecond seconds after the first, so that every
	// terminator meets the same input. Zero writes them as fast as the API
	// server takes them (64 writers): then each terminator's input depends
	// on the load it puts on the server, and a slower burst of exits costs
	// the terminator more CPU per pod (docs/measurements.md).
	ExitsPerSecond float64
	// ControllerAsMasters runs the controller with a client certificate in
	// system:masters, as the yardstick runs, under its ServiceAccount's user
	// name (so that the audit log still counts its writes): a diagnostic of
	// what its identity costs at the API server (authentication, RBAC,
	// Priority and Fairness), not how it ships.
	ControllerAsMasters bool
	// YardstickWorkers is the yardstick's concurrency; 0 is Workers. The
	// yardstick stands for what the machine allows, so it runs at its best:
	// at 20,000 pods over 150,000 it did worse with 64 workers (p99 12.6 s
	// and 13.7 s) than with 32 (2.5–3.5 s in four runs); its writes skip
	// Priority and Fairness (system:masters), so more of them at once slow
	// the API server for everyone.
	YardstickWorkers int
	QPS              float32
	Burst            int
	// Kruise adds OpenKruise's own SidecarTerminator (kruise-manager) to
	// every round: at its shipped client limits, and at KruiseQPS and
	// KruiseBurst when KruiseQPS > 0 (see kruise.go).
	Kruise      bool
	KruiseQPS   int
	KruiseBurst int
	// KruiseRaisedOnly leaves out the column at OpenKruise's shipped
	// client limits (QPS 30): at 20,000 pods its pod updates alone take
	// over 5 minutes a burst, so the scale tier runs the raised column only.
	KruiseRaisedOnly bool
	// SideBySide runs the controller and the yardstick through each
	// round's one burst at once, each acting on its own half of the pods
	// (sideBySidePod): whatever the API server and the machine do during
	// the burst, both meet it, and the exits are the same input for both.
	// Bursts run one after the other meet different stalls of the server
	// (one-round p99 ratios of 0.73× to 3.02× on the same code,
	// docs/measurements.md). Each terminator's figures are over its half;
	// each also watches the other's pods, as it would any Job's.
	SideBySide bool `json:"sideBySide,omitempty"`
	// RotateBy moves the rotation of which terminator goes first in a round
	// on by this many places: 1 has the yardstick first in round 1, so that
	// a one-round run can be had in either order.
	RotateBy int `json:"rotateBy,omitempty"`
	// ProfileDir, when set, runs the controller and kube-apiserver with
	// --profiling and keeps there the controller's CPU profile of the burst
	// and its heap profiles, and kube-apiserver's CPU profile over each
	// terminator's first burst (world.serverProfile).
	ProfileDir string `json:"-"`
	// LogDir, when set, keeps every controller's log there: of a chaos run
	// (chaos-SCENARIO-N.log), to read why a check failed, and of each bench
	// burst (RUN.controller.log), to follow a slow pod's syncs, with each
	// burst's timeline (RUN.controller.timeline.tsv, RUN.yardstick.timeline.tsv):
	// exits written, actions seen and pods finished, second by second.
	LogDir string `json:"-"`
	// ProfileSeconds is the CPU profile's length from the first main exit
	// (profileSeconds when zero); one as long as the burst shows what its
	// tail costs: the events, the pods finishing, the requeues.
	ProfileSeconds int                  `json:"-"`
	Root           string               `json:"-"` // repository root
	Logf           func(string, ...any) `json:"-"`
}

// Report is one run's figures.
type Report struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Config  Config `json:"config"`
	// Rounds hold each round's bursts: the controller's and the yardstick's,
	// in alternating order, so that neither always meets the fuller etcd or
	// the harder burst.
	Rounds []Round `json:"rounds"`
	// P99Ratio is the median over the rounds of the controller's p99 latency
	// over the yardstick's.
	P99Ratio float64 `json:"p99Ratio"`
	// CPURatio is the median over the rounds of the controller's CPU per
	// 1,000 pods over the yardstick's in the same round, as P99Ratio pairs
	// their p99s; CPURatioTotal is their CPU seconds over all the rounds,
	// each per its own pods. The yardstick's collections of its whole-pod
	// cache cost seconds each and fall in a round or not: the total
	// spreads them over the rounds.
	CPURatio      float64 `json:"cpuRatio,omitempty"`
	CPURatioTotal float64 `json:"cpuRatioTotal,omitempty"`
	// WritesPerPod counts the controller's mutating requests (events and
	// leases aside) from the API server's audit log, per pod of its bursts.
	WritesPerPod          float64  `json:"writesPerPod"`
	WriteKinds            []string `json:"writeKinds"`
	ControllerRSSInitial  int64    `json:"controllerRSSInitial"`
	ControllerHeapInitial int64    `json:"controllerHeapInitial"`
	ControllerHeapAfter   int64    `json:"controllerHeapAfter"`
	YardstickRSSInitial   int64    `json:"yardstickRSSInitial"`
	// ControllerIdleCPU and YardstickIdleCPU are the CPU seconds each
	// spends per second with nothing to do, after its initial list: what a
	// burst costs beside its work for each second it lasts.
	ControllerIdleCPU float64 `json:"controllerIdleCPUPerSecond"`
	YardstickIdleCPU  float64 `json:"yardstickIdleCPUPerSecond"`
	// YardstickWritesPerPod counts the yardstick's mutating requests, as
	// WritesPerPod the controller's (it runs as YardstickUser).
	YardstickWritesPerPod float64  `json:"yardstickWritesPerPod"`
	YardstickWriteKinds   []string `json:"yardstickWriteKinds"`
	// ServerTimes and YardstickServerTimes are how long the API server took
	// over each kind of request of the controller and of the yardstick
	// (audit log, the whole run, events included): whether one terminator's
	// writes wait longer at the server than the other's.
	ServerTimes          []string `json:"serverTimes,omitempty"`
	YardstickServerTimes []string `json:"yardstickServerTimes,omitempty"`
	// RSSRatioAfter is the controller's RSS over the yardstick's after the
	// last round's bursts.
	RSSRatioAfter float64 `json:"rssRatioAfter"`
	// Kruise holds OpenKruise's columns, one per setting, in the order of
	// each Round's Kruise.
	Kruise []KruiseColumn `json:"kruise,omitempty"`
	// commit is the run's commit, for latencies.json (latest.json's fields
	// stay as they were).
	commit string
}

// Round is one burst of each terminator.
type Round struct {
	Controller BurstResult `json:"controller"`
	Yardstick  BurstResult `json:"yardstick"`
	// Kruise is OpenKruise's bursts, one per Report.Kruise column.
	Kruise   []BurstResult `json:"kruise,omitempty"`
	P99Ratio float64       `json:"p99Ratio"`
	// CPURatio is the controller's CPU per 1,000 pods over the yardstick's.
	CPURatio float64 `json:"cpuRatio,omitempty"`
	// Breakdown is where the controller's time went during its burst.
	Breakdown Breakdown `json:"controllerBreakdown"`
	// ControllerMemory splits the controller's RSS at its burst's end.
	ControllerMemory Memory `json:"controllerMemory"`
	// Events is how many of the burst's pods got their SidecarTerminating
	// event, and EventsSeconds when the last was seen, from the first exit.
	Events        int     `json:"events"`
	EventsSeconds float64 `json:"eventsSeconds"`
	// ControllerServer and YardstickServer are where the API server's time
	// went during each one's burst.
	ControllerServer ServerStages `json:"controllerServer"`
	YardstickServer  ServerStages `json:"yardstickServer"`
}

// profileSeconds is the CPU profile's length: the 5,000-pod burst takes
// 20 to 40 s on 2 cores.
const profileSeconds = 30

// profileSeconds is Config.ProfileSeconds, or profileSeconds when unset.
func (c Config) profileSeconds() int {
	if c.ProfileSeconds > 0 {
		return c.ProfileSeconds
	}
	return profileSeconds
}

// world is what a run's rounds share.
type world struct {
	cfg          Config
	cp           *cluster.ControlPlane
	kube         kubernetes.Interface
	kruise       kruiseclient.Interface
	bin, runDir  string
	audit        string // the API server's audit log
	ctlArgs      []string
	controllerOK bool // the controller has run once: initial memory is taken
}

// Run brings up a control plane, fills it, and bursts each terminator
// cfg.Rounds times, alternating which goes first.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	logf := cfg.Logf
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Config: cfg, commit: gitCommit(cfg.Root)}
	runDir, err := os.MkdirTemp("", "sidecar-terminator-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(runDir)
	audit := filepath.Join(runDir, "audit.log")
	cp, err := cluster.StartControlPlane(ctx, cluster.Options{AuditLogPath: audit, Logf: logf, Profiling: cfg.ProfileDir != ""})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	w := &world{cfg: cfg, cp: cp, runDir: runDir, audit: audit}
	if w.kube, w.kruise, err = clients(cp.RestConfig); err != nil {
		return nil, err
	}
	if err := prepare(ctx, cp, w.kube, cfg); err != nil {
		return nil, err
	}
	if w.bin, err = cluster.BuildController(ctx, cfg.Root); err != nil {
		return nil, err
	}
	w.ctlArgs = []string{fmt.Sprintf("--kube-api-qps=%g", cfg.QPS), fmt.Sprintf("--kube-api-burst=%d", cfg.Burst), fmt.Sprintf("--workers=%d", cfg.Workers)}
	if cfg.ProfileDir != "" {
		w.ctlArgs = append(w.ctlArgs, "--profiling")
	}
	if cfg.ControllerAsMasters {
		// The last --kubeconfig wins over StartController's own.
		kc, err := cp.UserKubeconfig("controller-masters", cluster.ControllerServiceAccountUser, []string{"system:masters"})
		if err != nil {
			return nil, err
		}
		w.ctlArgs = append(w.ctlArgs, "--kubeconfig="+kc)
	}

	for _, s := range cfg.kruiseSettings() {
		rep.Kruise = append(rep.Kruise, KruiseColumn{Setting: s, Terminator: s.Name()})
	}

	var ratios []float64
	kruiseRatios := make([][]float64, len(rep.Kruise))
	for r := 1; r <= max(cfg.Rounds, 1); r++ {
		round := Round{Kruise: make([]BurstResult, len(rep.Kruise))}
		bursts := []func() error{
			func() error { return w.controllerRound(ctx, rep, &round, fmt.Sprintf("ctl%d", r), false) },
			func() error { return w.yardstickRound(ctx, rep, &round, fmt.Sprintf("yard%d", r)) },
		}
		if cfg.SideBySide {
			bursts = []func() error{func() error { return w.controllerRound(ctx, rep, &round, fmt.Sprintf("both%d", r), true) }}
		}
		for i, s := range rep.Kruise {
			run := fmt.Sprintf("kr%d-q%d", r, s.Setting.QPS)
			bursts = append(bursts, func() error { return w.kruiseRound(ctx, rep, &round, i, run) })
		}
		for _, i := range rotation(len(bursts), r-1+cfg.RotateBy) {
			if err := bursts[i](); err != nil {
				return nil, fmt.Errorf("round %d: %w", r, err)
			}
		}
		if round.Yardstick.P99 > 0 {
			round.P99Ratio = round.Controller.P99 / round.Yardstick.P99
		}
		logf("round %d: p99 controller %.2fs, yardstick %.2fs: %.2f×", r, round.Controller.P99, round.Yardstick.P99, round.P99Ratio)
		ratios = append(ratios, round.P99Ratio)
		for i, k := range round.Kruise {
			logf("round %d: p99 %s %.2fs", r, k.Terminator, k.P99)
			if k.P99 > 0 {
				kruiseRatios[i] = append(kruiseRatios[i], round.Controller.P99/k.P99)
			}
		}
		rep.Rounds = append(rep.Rounds, round)
	}
	sort.Float64s(ratios)
	rep.P99Ratio = median(ratios)
	rep.pairCPU()
	for i := range rep.Kruise {
		sort.Float64s(kruiseRatios[i])
		col := &rep.Kruise[i]
		col.P99Ratio = median(kruiseRatios[i])
		col.WritesPerPod = float64(len(col.writes)) / float64(podsOf(rep.Rounds, func(r Round) BurstResult { return r.Kruise[i] }))
		col.WriteKinds = kinds(col.writes)
	}
	last := rep.Rounds[len(rep.Rounds)-1]
	if last.Yardstick.RSSBytesAfter > 0 {
		rep.RSSRatioAfter = float64(last.Controller.RSSBytesAfter) / float64(last.Yardstick.RSSBytesAfter)
	}
	time.Sleep(2 * time.Second) // the audit log is written in 1 s batches
	writes, err := cluster.MutatingRequests(audit, cluster.ControllerServiceAccountUser)
	if err != nil {
		return nil, err
	}
	rep.WritesPerPod = float64(len(writes)) / float64(podsOf(rep.Rounds, func(r Round) BurstResult { return r.Controller }))
	rep.WriteKinds = kinds(writes)
	if writes, err = cluster.MutatingRequests(audit, YardstickUser); err != nil {
		return nil, err
	}
	rep.YardstickWritesPerPod = float64(len(writes)) / float64(podsOf(rep.Rounds, func(r Round) BurstResult { return r.Yardstick }))
	rep.YardstickWriteKinds = kinds(writes)
	if rep.ServerTimes, err = serverTimes(audit, cluster.ControllerServiceAccountUser); err != nil {
		return nil, err
	}
	if rep.YardstickServerTimes, err = serverTimes(audit, YardstickUser); err != nil {
		return nil, err
	}
	return rep, nil
}

// pairCPU sets each round's CPURatio and the report's CPURatio and
// CPURatioTotal, from the rounds where the yardstick's CPU was measured.
func (rep *Report) pairCPU() {
	var ratios []float64
	var controller, yardstick float64
	var pc, py int
	for i := range rep.Rounds {
		r := &rep.Rounds[i]
		if r.Yardstick.CPUSecondsPer1000 <= 0 || r.Yardstick.CPUSeconds <= 0 {
			continue
		}
		r.CPURatio = r.Controller.CPUSecondsPer1000 / r.Yardstick.CPUSecondsPer1000
		ratios = append(ratios, r.CPURatio)
		controller, yardstick = controller+r.Controller.CPUSeconds, yardstick+r.Yardstick.CPUSeconds
		pc, py = pc+r.Controller.Pods, py+r.Yardstick.Pods
	}
	if len(ratios) == 0 || pc == 0 || py == 0 {
		return
	}
	sort.Float64s(ratios)
	rep.CPURatio = median(ratios)
	rep.CPURatioTotal = (controller / float64(pc)) / (yardstick / float64(py))
}

// podsOf counts one terminator's pods over the rounds (at least 1): its
// whole bursts, or its halves of shared ones.
func podsOf(rounds []Round, of func(Round) BurstResult) int {
	n := 0
	for _, r := range rounds {
		n += of(r).Pods
	}
	return max(n, 1)
}

// serverTimes is cluster.ServerTimes as "kind ×count, mean ms at the server".
func serverTimes(audit, user string) ([]string, error) {
	times, err := cluster.ServerTimes(audit, user)
	out := make([]string, len(times))
	for i, t := range times {
		out[i] = fmt.Sprintf("%s ×%d, %d ms", t.Kind, t.Count, t.Mean().Milliseconds())
	}
	return out, err
}
