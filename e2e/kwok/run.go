package kwok

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// Terminator is what stops the sidecars in a run.
type Terminator string

const (
	// Controller is this project's controller, the binary, out of cluster
	// under its own ServiceAccount, at its shipped defaults.
	Controller Terminator = "sidecar-terminator"
	// Kruise is OpenKruise's kruise-manager with its SidecarTerminator
	// gate on, at its shipped client limits: on nodes labelled
	// type=virtual-kubelet it updates the sidecar's image in place.
	Kruise Terminator = "openkruise"
	// None runs no terminator: no sidecar ends, so no Job completes.
	None Terminator = "none"
)

// Terminators are the three, in the order a full run takes them.
var Terminators = []Terminator{Controller, Kruise, None}

// Config sizes one run.
type Config struct {
	Nodes, Jobs int
	Terminator  Terminator
	// MainExit is how long each main runs (the main-exit stage's delay).
	MainExit time.Duration
	// SubmitWorkers create the Jobs concurrently through one client.
	SubmitWorkers int
	// Stall bounds the wait: a run fails when no Job moves a step for
	// this long.
	Stall time.Duration
	// NoneWatch is how long a run with no terminator watches, once every
	// main has exited, for a Job that completes anyway.
	NoneWatch time.Duration
	// ControllerBin is the controller binary (cluster.BuildController);
	// Root the repository, for its RBAC manifest.
	ControllerBin, Root string
	KeepRunDir          bool
	Logf                func(format string, args ...any)
}

// Quantiles of a latency, in seconds.
type Quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func quantiles(secs []float64) Quantiles {
	if len(secs) == 0 {
		return Quantiles{}
	}
	sort.Float64s(secs)
	at := func(q float64) float64 { return secs[min(len(secs)-1, int(q*float64(len(secs))))] }
	return Quantiles{N: len(secs), P50: at(0.50), P99: at(0.99), Max: secs[len(secs)-1]}
}

// Process is one process's figures over the run.
type Process struct {
	Name       string  `json:"name"`
	PeakRSS    int64   `json:"peakRSSBytes"`
	CPUSeconds float64 `json:"cpuSeconds"`
}

// Result is one terminator's run.
type Result struct {
	Terminator  Terminator `json:"terminator"`
	Nodes       int        `json:"nodes"`
	Jobs        int        `json:"jobs"`
	MainExitSec float64    `json:"mainExitSeconds"`
	// Seconds from the first Job's create: the last create, the last pod
	// Running, the last main exit, the last Job Complete.
	SubmitSec      float64 `json:"submitSeconds"`
	AllRunningSec  float64 `json:"allRunningSeconds"`
	AllExitedSec   float64 `json:"allMainsExitedSeconds"`
	AllCompleteSec float64 `json:"allCompleteSeconds"`
	// Counts of Jobs at the end.
	Exited    int `json:"mainsExited"`
	Written   int `json:"sidecarsSwapped"`
	Succeeded int `json:"podsSucceeded"`
	Complete  int `json:"jobsComplete"`
	// ExitToComplete is the main's exit → Job Complete; ExitToWrite the
	// terminator's share (main exit → its image swap seen); WriteToSucceeded
	// kwok's (the quick-exit stage); SucceededToComplete the Job
	// controller's.
	ExitToComplete      Quantiles `json:"exitToComplete"`
	ExitToWrite         Quantiles `json:"exitToWrite"`
	WriteToSucceeded    Quantiles `json:"writeToSucceeded"`
	SucceededToComplete Quantiles `json:"succeededToComplete"`
	// The terminator's peak RSS (VmHWM) and its CPU from the first create
	// to the end; zero for none.
	TerminatorPeakRSS int64   `json:"terminatorPeakRSSBytes"`
	TerminatorCPU     float64 `json:"terminatorCPUSeconds"`
	// Processes are the control plane's (and kwok's) peaks, over the whole
	// run including start-up.
	Processes  []Process `json:"processes"`
	WallSec    float64   `json:"wallSeconds"`
	LoadBefore string    `json:"loadAverageBefore"`
	LoadAfter  string    `json:"loadAverageAfter"`
}

// Run starts a kwok control plane with cfg.Nodes nodes and the
// terminator, submits cfg.Jobs Jobs, and waits until every Job is
// Complete (with no terminator: until every main has exited, then
// cfg.NoneWatch more), then stops it all. It fails when a Job stalls, or when
// a Job completes with no terminator.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	t0 := time.Now()
	res = &Result{Terminator: cfg.Terminator, Nodes: cfg.Nodes, Jobs: cfg.Jobs, MainExitSec: cfg.MainExit.Seconds(), LoadBefore: loadAverage()}
	k, err := cluster.StartKwok(ctx, cluster.KwokOptions{Nodes: cfg.Nodes, QuickExitImage: QuickExitImage, MainExit: cfg.MainExit,
		KeepRunDir: cfg.KeepRunDir, BeforeControllers: installKruiseCRDs, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopErr := k.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stop the kwok cluster: %w", stopErr)
		}
	}()
	if err := k.EnsureNamespace(ctx, Namespace); err != nil {
		return nil, err
	}
	term, err := startTerminator(ctx, k, cfg)
	if err != nil {
		return nil, err
	}
	defer term.stop()
	c := rest.CopyConfig(k.RestConfig)
	c.QPS, c.Burst = 1000, 2000 // the harness must not throttle the submission
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	tl := watchTimeline(kube)
	defer tl.close()
	var cpu0 float64
	if term.pid > 0 {
		st, err := readProc(term.pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Terminator, err)
		}
		cpu0 = st.CPUSeconds
	}
	logf("%s: submitting %d Jobs on %d kwok nodes (load %s)", cfg.Terminator, cfg.Jobs, cfg.Nodes, res.LoadBefore)
	start := time.Now()
	if err := submit(ctx, kube, cfg.Jobs, cfg.SubmitWorkers); err != nil {
		return nil, err
	}
	res.SubmitSec = time.Since(start).Seconds()
	logf("%s: %d Jobs created in %.1fs", cfg.Terminator, cfg.Jobs, res.SubmitSec)
	waitErr := wait(ctx, tl, cfg, term, logf)
	if term.pid > 0 {
		if st, err := readProc(term.pid); err == nil {
			res.TerminatorPeakRSS, res.TerminatorCPU = st.PeakRSS, st.CPUSeconds-cpu0
		}
	}
	for _, p := range k.Processes() {
		if st, err := readProc(p.PID); err == nil {
			res.Processes = append(res.Processes, Process{Name: p.Name, PeakRSS: st.PeakRSS, CPUSeconds: st.CPUSeconds})
		}
	}
	n := tl.counts()
	res.Exited, res.Written, res.Succeeded, res.Complete = n.Exited, n.Written, n.Succeeded, n.Complete
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(start).Seconds()
	}
	var last time.Time
	_, last = tl.spans(atRunning, atRunning)
	res.AllRunningSec = since(last)
	_, last = tl.spans(atMainExit, atMainExit)
	res.AllExitedSec = since(last)
	var secs []float64
	secs, last = tl.spans(atMainExit, atComplete)
	res.ExitToComplete, res.AllCompleteSec = quantiles(secs), since(last)
	secs, _ = tl.spans(atMainExit, atWrite)
	res.ExitToWrite = quantiles(secs)
	secs, _ = tl.spans(atWrite, atSucceeded)
	res.WriteToSucceeded = quantiles(secs)
	secs, _ = tl.spans(atSucceeded, atComplete)
	res.SucceededToComplete = quantiles(secs)
	res.LoadAfter = loadAverage()
	res.WallSec = time.Since(t0).Seconds()
	return res, waitErr
}

// wait polls the timeline until the run is over; see Run.
func wait(ctx context.Context, tl *timeline, cfg Config, term *terminator, logf func(string, ...any)) error {
	var (
		prev           counts
		moved, lastLog = time.Now(), time.Now()
		allExited      time.Time
		tick           = time.NewTicker(time.Second)
	)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		n := tl.counts()
		if n != prev {
			prev, moved = n, time.Now()
		}
		if time.Since(lastLog) >= 15*time.Second {
			lastLog = time.Now()
			logf("%s: of %d Jobs: %d Running, %d mains exited, %d sidecars swapped, %d pods Succeeded, %d Complete (load %s)",
				cfg.Terminator, cfg.Jobs, n.Running, n.Exited, n.Written, n.Succeeded, n.Complete, loadAverage())
		}
		if term.died() {
			return fmt.Errorf("%s exited mid-run: %s", cfg.Terminator, term.logTail())
		}
		if cfg.Terminator == None {
			if n.Complete > 0 {
				return fmt.Errorf("with no terminator %d Jobs completed", n.Complete)
			}
			if n.Exited == cfg.Jobs && allExited.IsZero() {
				allExited = time.Now()
			}
			if !allExited.IsZero() && time.Since(allExited) >= cfg.NoneWatch {
				return nil
			}
		} else if n.Complete == cfg.Jobs {
			return nil
		}
		if time.Since(moved) > cfg.Stall {
			return fmt.Errorf("%s: no Job moved a step in %s: of %d, %d Running, %d mains exited, %d swapped, %d Succeeded, %d Complete; %s",
				cfg.Terminator, cfg.Stall, cfg.Jobs, n.Running, n.Exited, n.Written, n.Succeeded, n.Complete, term.logTail())
		}
	}
}

// installKruiseCRDs installs OpenKruise's CRDs before the controllers
// start, in every run, so that each terminator meets the same API.
func installKruiseCRDs(ctx context.Context, cp *cluster.ControlPlane) error {
	files, err := cluster.KruiseCRDFiles(ctx)
	if err != nil {
		return err
	}
	return cp.InstallCRDs(ctx, files)
}
