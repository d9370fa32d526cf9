package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// controllerRound starts the controller, bursts it, and stops it; with
// withYardstick, the yardstick runs the same burst beside it on its own
// half of the pods (Config.SideBySide). The first time it also takes the
// memory after the initial list and, with a profile directory, the
// profiles.
func (w *world) controllerRound(ctx context.Context, rep *Report, round *Round, run string, withYardstick bool) error {
	logf := w.cfg.Logf
	// At the shipped defaults: the Deployment's memory limit too.
	memLimit, err := shippedMemoryLimitEnv(w.cfg.Root)
	if err != nil {
		return err
	}
	c := &cluster.Cluster{ControlPlane: w.cp, ControllerEnv: []string{memLimit}}
	ctl, err := c.StartController(ctx, w.bin, w.ctlArgs...)
	if err != nil {
		return err
	}
	defer ctl.Stop()
	time.Sleep(5 * time.Second) // let the initial list settle before reading memory
	first := !w.controllerOK
	w.controllerOK = true
	prof := controllerProfiler(w.cfg.ProfileDir, w.bin, ctl.MetricsURL, logf)
	profiling := first && w.cfg.ProfileDir != ""
	if first {
		rep.ControllerRSSInitial, _ = rssBytes(ctl.Process.PID)
		rep.ControllerHeapInitial = heap(ctx, ctl)
		logf("controller ready: RSS %s, heap %s", mib(rep.ControllerRSSInitial), mib(rep.ControllerHeapInitial))
		rep.ControllerIdleCPU = idleCPU(ctl.Process.PID)
		logf("controller idle: %.4f CPU s per second", rep.ControllerIdleCPU)
		if profiling {
			prof.take(ctx, "heap", "controller.heap.initial")
		}
	}
	procs := []proc{{controllerTerminator, ctl.Process.PID}}
	opts := w.burstOptions()
	if withYardstick {
		yard, err := w.yardstickUp(ctx, rep)
		if err != nil {
			return err
		}
		defer func() { _ = yard.Process.Kill(); _ = yard.Wait() }()
		procs = append(procs, proc{yardstickTerminator, yard.Process.Pid})
		opts.pod = sideBySidePod
	}
	profiled := make(chan struct{})
	if profiling {
		// The profile covers the burst from the first main exit; the watches
		// it runs beside outlive the profile, so it gets its own context.
		opts.during = func(context.Context, *burst) {
			defer close(profiled)
			var server sync.WaitGroup
			server.Go(func() { w.serverProfile(ctx, "apiserver.cpu.controller-burst") })
			prof.take(ctx, fmt.Sprintf("profile?seconds=%d", w.cfg.profileSeconds()), "controller.cpu.burst")
			server.Wait()
		}
		opts.afterExits = func() { prof.take(ctx, "heap", "controller.heap.peak") }
	} else {
		close(profiled)
	}
	before, err := snapshot(ctx, ctl)
	if err != nil {
		return err
	}
	if round.ControllerServer, err = stagesAcross(ctx, w.kube, logf, func() error {
		results, err := runBurst(ctx, w.kube, w.kruise, run, w.cfg.BurstPods, procs, logf, opts)
		if err != nil {
			return err
		}
		round.Controller = results[0]
		if withYardstick {
			round.Yardstick = results[1]
		}
		return nil
	}); err != nil {
		return err
	}
	logServerStages(logf, run, round.ControllerServer)
	if withYardstick {
		keepTimeline(w.cfg, run+".yardstick.timeline.tsv", round.Yardstick)
	}
	<-profiled
	round.ControllerMemory = memoryOf(ctx, ctl)
	logf("%s: controller memory at the burst's end: %s", run, round.ControllerMemory)
	after, err := snapshot(ctx, ctl)
	if err != nil {
		return err
	}
	keepTimeline(w.cfg, run+".controller.timeline.tsv", round.Controller)
	round.Breakdown = breakdown(before, after)
	logf("%s: controller during the burst: %s", run, round.Breakdown)
	round.Events, round.EventsSeconds = waitForEvents(ctx, w.kube, run, round.Controller.Pods, round.Controller.FirstExit)
	if cpu, err := cpuSeconds(ctl.Process.PID); err == nil {
		round.Controller.CPUWithEventsPer1000 = (cpu - round.Controller.cpuStart) * 1000 / float64(round.Controller.Pods)
	}
	logf("%s: %d SidecarTerminating events, the last seen %.1fs after the first main exit; CPU s / 1000 pods %.2f, %.2f with the events written",
		run, round.Events, round.EventsSeconds, round.Controller.CPUSecondsPer1000, round.Controller.CPUWithEventsPer1000)
	if profiling {
		prof.take(ctx, "heap", "controller.heap.after")
	}
	rep.ControllerHeapAfter = heap(ctx, ctl)
	if err := ctl.Stop(); err != nil {
		return err
	}
	keepLog(w.cfg, run+".controller.log", ctl.Process.LogPath)
	return w.clearRun(ctx, run)
}

// yardstickRound starts the yardstick, bursts it, and stops it.
func (w *world) yardstickRound(ctx context.Context, rep *Report, round *Round, run string) error {
	first := rep.YardstickRSSInitial == 0
	yard, err := w.yardstickUp(ctx, rep)
	if err != nil {
		return err
	}
	defer func() { _ = yard.Process.Kill(); _ = yard.Wait() }()
	opts := w.burstOptions()
	profiled := make(chan struct{})
	if first && w.cfg.ProfileDir != "" {
		opts.during = func(context.Context, *burst) {
			defer close(profiled)
			w.serverProfile(ctx, "apiserver.cpu.yardstick-burst")
		}
	} else {
		close(profiled)
	}
	if round.YardstickServer, err = stagesAcross(ctx, w.kube, w.cfg.Logf, func() (err error) {
		round.Yardstick, err = runBurstWith(ctx, w.kube, w.kruise, run, w.cfg.BurstPods, yard.Process.Pid, w.cfg.Logf, opts)
		return err
	}); err != nil {
		return err
	}
	<-profiled
	logServerStages(w.cfg.Logf, run, round.YardstickServer)
	round.Yardstick.Terminator = yardstickTerminator
	keepTimeline(w.cfg, run+".yardstick.timeline.tsv", round.Yardstick)
	_ = yard.Process.Kill()
	_ = yard.Wait()
	return w.clearRun(ctx, run)
}

// yardstickUp starts the yardstick and lets its initial list settle; the
// first time, it also takes its memory and idle CPU.
func (w *world) yardstickUp(ctx context.Context, rep *Report) (*exec.Cmd, error) {
	kubeconfig, err := w.cp.UserKubeconfig("yardstick", YardstickUser, []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	yard, err := startYardstick(ctx, kubeconfig, w.runDir, w.cfg)
	if err != nil {
		return nil, err
	}
	time.Sleep(5 * time.Second)
	if rep.YardstickRSSInitial == 0 {
		rep.YardstickRSSInitial, _ = rssBytes(yard.Process.Pid)
		rep.YardstickIdleCPU = idleCPU(yard.Process.Pid)
		w.cfg.Logf("yardstick idle: %.4f CPU s per second", rep.YardstickIdleCPU)
	}
	return yard, nil
}

// serverProfile takes kube-apiserver's CPU profile over the first burst of
// each terminator, beside the controller's own, so that what the server
// did more for one than for the other can be read (`go tool pprof -top
// -diff_base=apiserver.cpu.yardstick-burst.pprof
// apiserver.cpu.controller-burst.pprof`). The server cuts a request off at
// 60 s (--request-timeout), so its profile is at most serverProfileMax.
func (w *world) serverProfile(ctx context.Context, name string) {
	seconds := min(w.cfg.profileSeconds(), serverProfileMax)
	apiServerProfiler(w.cfg.ProfileDir, w.kube, w.cfg.Logf).take(ctx, fmt.Sprintf("profile?seconds=%d", seconds), name)
}

// serverProfileMax is the longest kube-apiserver profile, in seconds.
const serverProfileMax = 50

// burstOptions are what every terminator's burst in a run shares: the
// exits' pace, and the control plane's processes whose CPU it counts.
func (w *world) burstOptions() burstOptions {
	servers := map[string]int{}
	for _, p := range w.cp.Processes() {
		if p.Name == cluster.KubeAPIServer || p.Name == cluster.Etcd {
			servers[p.Name] = p.PID
		}
	}
	return burstOptions{exitsPerSecond: w.cfg.ExitsPerSecond, servers: servers}
}

// clearRun deletes a burst's pods, every CRR and every event, so that each
// burst meets the same cluster: 50,000 background pods and the idle Jobs.
// Nothing runs the pods, so they go at once (grace 0), and no garbage
// collector runs.
func (w *world) clearRun(ctx context.Context, run string) error {
	zero := int64(0)
	pods := w.kube.CoreV1().Pods(Namespace)
	burst := metav1.ListOptions{LabelSelector: runLabel + "=" + run}
	if err := deleteUntilNoneLeft(run+" pods",
		func() error {
			return pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, burst)
		},
		counter(ctx, pods.List, burst)); err != nil {
		return err
	}
	crrs := w.kruise.AppsV1alpha1().ContainerRecreateRequests(Namespace)
	if err := deleteUntilNoneLeft("CRRs",
		func() error { return crrs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}) },
		counter(ctx, crrs.List, metav1.ListOptions{})); err != nil {
		return err
	}
	// And the burst's events: OpenKruise's SidecarTerminator events tell a
	// controller starting later that OpenKruise's terminator acts in the
	// cluster (app/second.go), and it then reads kruise's CRR before each
	// first CRR of its own and waits for it: a controller burst after a
	// kruise burst measured that mode (2,500 more reads and 1,900 to 2,500
	// more syncs per burst) rather than the one users run.
	events := w.kube.CoreV1().Events(Namespace)
	return deleteUntilNoneLeft("events",
		func() error { return events.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}) },
		counter(ctx, events.List, metav1.ListOptions{}))
}

// counter counts what list finds, from the API server's watch cache.
func counter[L runtime.Object](ctx context.Context, list func(context.Context, metav1.ListOptions) (L, error), opts metav1.ListOptions) func() (int, error) {
	opts.ResourceVersion = "0"
	return func() (int, error) {
		l, err := list(ctx, opts)
		if err != nil {
			return 0, err
		}
		return meta.LenList(l), nil
	}
}

// deleteUntilNoneLeft sends a delete-collection until count finds none
// left (counted from the API server's watch cache). One delete-collection
// of 20,000 pods or events outlasts the API server's request timeout (60 s)
// and is cut off part way, so it is sent again, until one fails without
// progress or 10 minutes have passed.
func deleteUntilNoneLeft(what string, deleteAll func() error, count func() (int, error)) error {
	left := -1
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(time.Second) {
		err := deleteAll()
		n, cerr := count()
		switch {
		case cerr != nil:
			return fmt.Errorf("delete %s: %w", what, errors.Join(err, cerr))
		case n == 0:
			return nil
		case err != nil && left >= 0 && n >= left, time.Now().After(deadline):
			return fmt.Errorf("delete %s: %d left: %w", what, n, err)
		}
		left = n
	}
}

// rotation is the order in which a round runs its n bursts: each round
// starts one further along, so that no terminator always meets the fuller
// etcd or follows the same one. With two it alternates.
func rotation(n, by int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i + by) % n
	}
	return out
}
