package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// Config sizes a run.
type Config struct {
	BurstPods      int
	BackgroundPods int // restartPolicy Always pods, out of the controller's cache by field selector
	IdleJobPods    int // Job pods whose mains keep running
	Rounds         int // bursts of each terminator
	Workers        int
	QPS            float32
	Burst          int
	// Kruise adds OpenKruise's own SidecarTerminator (kruise-manager) to
	// every round: at its shipped client limits, and at KruiseQPS and
	// KruiseBurst when KruiseQPS > 0 (see kruise.go).
	Kruise      bool
	KruiseQPS   int
	KruiseBurst int
	// ProfileDir, when set, runs the controller with --profiling and keeps a
	// CPU profile of the burst and heap profiles there.
	ProfileDir string `json:"-"`
	// LogDir, when set, keeps every controller's log of a chaos run there
	// (chaos-SCENARIO-N.log), to read why a check failed.
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
	// RSSRatioAfter is the controller's RSS over the yardstick's after the
	// last round's bursts.
	RSSRatioAfter float64 `json:"rssRatioAfter"`
	// Kruise holds OpenKruise's columns, one per setting, in the order of
	// each Round's Kruise.
	Kruise []KruiseColumn `json:"kruise,omitempty"`
}

// Round is one burst of each terminator.
type Round struct {
	Controller BurstResult `json:"controller"`
	Yardstick  BurstResult `json:"yardstick"`
	// Kruise is OpenKruise's bursts, one per Report.Kruise column.
	Kruise   []BurstResult `json:"kruise,omitempty"`
	P99Ratio float64       `json:"p99Ratio"`
	// Breakdown is where the controller's time went during its burst.
	Breakdown Breakdown `json:"controllerBreakdown"`
	// Events is how many of the burst's pods got their SidecarTerminating
	// event, and EventsSeconds when the last was seen, from the first exit.
	Events        int     `json:"events"`
	EventsSeconds float64 `json:"eventsSeconds"`
}

// profileSeconds is the CPU profile's length: the 5,000-pod burst takes
// 20 to 40 s on 2 cores.
const profileSeconds = 30

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
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Config: cfg}
	runDir, err := os.MkdirTemp("", "sidecar-terminator-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(runDir)
	audit := filepath.Join(runDir, "audit.log")
	cp, err := cluster.StartControlPlane(ctx, cluster.Options{AuditLogPath: audit, Logf: logf})
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

	for _, s := range cfg.kruiseSettings() {
		rep.Kruise = append(rep.Kruise, KruiseColumn{Setting: s, Terminator: s.Name()})
	}

	var ratios []float64
	kruiseRatios := make([][]float64, len(rep.Kruise))
	for r := 1; r <= max(cfg.Rounds, 1); r++ {
		round := Round{Kruise: make([]BurstResult, len(rep.Kruise))}
		bursts := []func() error{
			func() error { return w.controllerRound(ctx, rep, &round, fmt.Sprintf("ctl%d", r)) },
			func() error { return w.yardstickRound(ctx, rep, &round, fmt.Sprintf("yard%d", r)) },
		}
		for i, s := range rep.Kruise {
			run := fmt.Sprintf("kr%d-q%d", r, s.Setting.QPS)
			bursts = append(bursts, func() error { return w.kruiseRound(ctx, rep, &round, i, run) })
		}
		for _, i := range rotation(len(bursts), r-1) {
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
	for i := range rep.Kruise {
		sort.Float64s(kruiseRatios[i])
		col := &rep.Kruise[i]
		col.P99Ratio = median(kruiseRatios[i])
		col.WritesPerPod = float64(len(col.writes)) / float64(cfg.BurstPods*len(rep.Rounds))
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
	rep.WritesPerPod = float64(len(writes)) / float64(cfg.BurstPods*len(rep.Rounds))
	rep.WriteKinds = kinds(writes)
	if writes, err = cluster.MutatingRequests(audit, YardstickUser); err != nil {
		return nil, err
	}
	rep.YardstickWritesPerPod = float64(len(writes)) / float64(cfg.BurstPods*len(rep.Rounds))
	rep.YardstickWriteKinds = kinds(writes)
	return rep, nil
}

// controllerRound starts the controller, bursts it, and stops it. The first
// time it also takes the memory after the initial list and, with a profile
// directory, the profiles.
func (w *world) controllerRound(ctx context.Context, rep *Report, round *Round, run string) error {
	logf := w.cfg.Logf
	c := &cluster.Cluster{ControlPlane: w.cp}
	ctl, err := c.StartController(ctx, w.bin, w.ctlArgs...)
	if err != nil {
		return err
	}
	defer ctl.Stop()
	time.Sleep(5 * time.Second) // let the initial list settle before reading memory
	first := !w.controllerOK
	w.controllerOK = true
	prof := &profiler{dir: w.cfg.ProfileDir, binary: w.bin, metricsURL: ctl.MetricsURL, logf: logf}
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
	var opts burstOptions
	profiled := make(chan struct{})
	if profiling {
		// The profile covers the burst from the first main exit; the watches
		// it runs beside outlive the profile, so it gets its own context.
		opts.during = func(context.Context, *burst) {
			defer close(profiled)
			seconds := w.cfg.ProfileSeconds
			if seconds <= 0 {
				seconds = profileSeconds
			}
			prof.take(ctx, fmt.Sprintf("profile?seconds=%d", seconds), "controller.cpu.burst")
		}
	} else {
		close(profiled)
	}
	before, err := snapshot(ctx, ctl)
	if err != nil {
		return err
	}
	if round.Controller, err = runBurstWith(ctx, w.kube, w.kruise, run, w.cfg.BurstPods, ctl.Process.PID, logf, opts); err != nil {
		return err
	}
	<-profiled
	after, err := snapshot(ctx, ctl)
	if err != nil {
		return err
	}
	round.Controller.Terminator = "sidecar-terminator"
	round.Breakdown = breakdown(before, after)
	logf("%s: controller during the burst: %s", run, round.Breakdown)
	round.Events, round.EventsSeconds = waitForEvents(ctx, w.kube, run, w.cfg.BurstPods, round.Controller.FirstExit)
	if cpu, err := cpuSeconds(ctl.Process.PID); err == nil {
		round.Controller.CPUWithEventsPer1000 = (cpu - round.Controller.cpuStart) * 1000 / float64(w.cfg.BurstPods)
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
	return w.clearRun(ctx, run)
}

// yardstickRound starts the yardstick, bursts it, and stops it.
func (w *world) yardstickRound(ctx context.Context, rep *Report, round *Round, run string) error {
	kubeconfig, err := w.cp.UserKubeconfig("yardstick", YardstickUser, []string{"system:masters"})
	if err != nil {
		return err
	}
	yard, err := startYardstick(ctx, kubeconfig, w.runDir, w.cfg)
	if err != nil {
		return err
	}
	defer func() { _ = yard.Process.Kill(); _ = yard.Wait() }()
	time.Sleep(5 * time.Second)
	if rep.YardstickRSSInitial == 0 {
		rep.YardstickRSSInitial, _ = rssBytes(yard.Process.Pid)
		rep.YardstickIdleCPU = idleCPU(yard.Process.Pid)
		w.cfg.Logf("yardstick idle: %.4f CPU s per second", rep.YardstickIdleCPU)
	}
	if round.Yardstick, err = runBurst(ctx, w.kube, w.kruise, run, w.cfg.BurstPods, yard.Process.Pid, w.cfg.Logf); err != nil {
		return err
	}
	round.Yardstick.Terminator = "yardstick"
	_ = yard.Process.Kill()
	_ = yard.Wait()
	return w.clearRun(ctx, run)
}

// clearRun deletes a burst's pods, every CRR and every event, so that each
// burst meets the same cluster: 50,000 background pods and the idle Jobs.
// Nothing runs the pods, so they go at once (grace 0), and no garbage
// collector runs.
func (w *world) clearRun(ctx context.Context, run string) error {
	zero := int64(0)
	if err := w.kube.CoreV1().Pods(Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: runLabel + "=" + run}); err != nil {
		return fmt.Errorf("delete %s pods: %w", run, err)
	}
	if err := w.kruise.AppsV1alpha1().ContainerRecreateRequests(Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete CRRs: %w", err)
	}
	// And the burst's events: OpenKruise's SidecarTerminator events tell a
	// controller starting later that OpenKruise's terminator acts in the
	// cluster (app/second.go), and it then reads kruise's CRR before each
	// first CRR of its own and waits for it: a controller burst after a
	// kruise burst measured that mode (2,500 more reads and 1,900 to 2,500
	// more syncs per burst) rather than the one users run.
	if err := w.kube.CoreV1().Events(Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete events: %w", err)
	}
	return nil
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

func median(sorted []float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	if len(sorted)%2 == 1 {
		return sorted[len(sorted)/2]
	}
	return (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
}

func clients(cfg *rest.Config) (kubernetes.Interface, kruiseclient.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5000, 10000 // the benchmark must not be what throttles the burst
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, nil, err
	}
	kruise, err := kruiseclient.NewForConfig(c)
	return kube, kruise, err
}

// prepare installs the CRR API and the controller's RBAC, creates the nodes,
// the background pods and the idle Job pods.
func prepare(ctx context.Context, cp *cluster.ControlPlane, kube kubernetes.Interface, cfg Config) error {
	files, err := cluster.KruiseCRDFiles(ctx)
	if err != nil {
		return err
	}
	var crr []string
	for _, f := range files {
		// kruise-manager wants every kruise CRD; the others only the CRR's.
		if cfg.Kruise || strings.Contains(filepath.Base(f), "containerrecreaterequests") {
			crr = append(crr, f)
		}
	}
	if err := cp.InstallCRDs(ctx, crr); err != nil {
		return err
	}
	if err := cp.ApplyControllerRBAC(ctx, cfg.Root); err != nil {
		return err
	}
	for name, labels := range benchNodes() {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	start := time.Now()
	if err := parallel(cfg.BackgroundPods, 64, func(i int) error {
		_, err := kube.CoreV1().Pods(Namespace).Create(ctx, backgroundPod(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create background pods: %w", err)
	}
	cfg.Logf("%d background pods created in %s", cfg.BackgroundPods, time.Since(start).Round(time.Second))
	b := &burst{kube: kube, run: "idle"}
	return b.create(ctx, cfg.IdleJobPods)
}

// YardstickUser is the yardstick's identity, so that the audit log tells
// its writes apart from the bench's own.
const YardstickUser = "bench:yardstick"

// benchNodes are the bench's Node objects and their labels: one normal
// node, two virtual ones labelled as OpenKruise knows a virtual kubelet.
// None has a Ready condition (see kruise.go).
func benchNodes() map[string]map[string]string {
	return map[string]map[string]string{
		NormalNode: nil, VirtualNodePrefix + "1": {"type": "virtual-kubelet"}, VirtualNodePrefix + "2": {"type": "virtual-kubelet"},
	}
}

func startYardstick(ctx context.Context, kubeconfig, runDir string, cfg Config) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ready := filepath.Join(runDir, "yardstick.ready")
	cmd := exec.CommandContext(ctx, exe, "yardstick", "--kubeconfig", kubeconfig, "--ready-file", ready,
		fmt.Sprintf("--workers=%d", cfg.Workers), fmt.Sprintf("--qps=%g", cfg.QPS), fmt.Sprintf("--burst=%d", cfg.Burst))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start yardstick: %w", err)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return cmd, nil
		}
	}
	_ = cmd.Process.Kill()
	return nil, fmt.Errorf("yardstick not ready after 2m")
}

// idleWindow is how long a terminator's idle CPU is measured.
const idleWindow = 10 * time.Second

// idleCPU is the process's CPU seconds per second over idleWindow.
func idleCPU(pid int) float64 {
	c0, err0 := cpuSeconds(pid)
	time.Sleep(idleWindow)
	c1, err1 := cpuSeconds(pid)
	if err0 != nil || err1 != nil {
		return 0
	}
	return (c1 - c0) / idleWindow.Seconds()
}

func heap(ctx context.Context, ctl *cluster.Controller) int64 {
	v, _ := ctl.Metric(ctx, "go_memstats_heap_alloc_bytes")
	return int64(v)
}

func kinds(writes []string) []string {
	count := map[string]int{}
	for _, w := range writes {
		f := strings.Fields(w)
		count[f[0]+" "+f[1]+" "+f[3]]++
	}
	var out []string
	for k, n := range count {
		out = append(out, fmt.Sprintf("%s ×%d", k, n))
	}
	return out
}

func machine() string {
	out, _ := exec.Command("uname", "-sr").Output()
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1] + " kB RAM"
	}
	return fmt.Sprintf("%d cores, %s, %s, %s", runtime.NumCPU(), mem, strings.TrimSpace(string(out)), runtime.Version())
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
