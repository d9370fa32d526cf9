package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	Workers        int
	QPS            float32
	Burst          int
	// ProfileDir, when set, runs the controller with --profiling and keeps a
	// CPU profile of the burst and heap profiles there.
	ProfileDir string               `json:"-"`
	Root       string               `json:"-"` // repository root
	Logf       func(string, ...any) `json:"-"`
}

// Report is one run's figures.
type Report struct {
	Date       string      `json:"date"`
	Machine    string      `json:"machine"`
	Config     Config      `json:"config"`
	Controller BurstResult `json:"controller"`
	Yardstick  BurstResult `json:"yardstick"`
	// P99Ratio is the controller's p99 latency over the yardstick's.
	P99Ratio float64 `json:"p99Ratio"`
	// WritesPerPod counts the controller's mutating requests (events and
	// leases aside) from the API server's audit log, per pod of the burst.
	WritesPerPod          float64  `json:"writesPerPod"`
	WriteKinds            []string `json:"writeKinds"`
	ControllerRSSInitial  int64    `json:"controllerRSSInitial"`
	ControllerHeapInitial int64    `json:"controllerHeapInitial"`
	ControllerHeapAfter   int64    `json:"controllerHeapAfter"`
	YardstickRSSInitial   int64    `json:"yardstickRSSInitial"`
	RSSRatioAfter         float64  `json:"rssRatioAfter"`
	// Breakdown is where the controller's time went during the burst.
	Breakdown Breakdown `json:"controllerBreakdown"`
	// Events is how many SidecarTerminating events the burst's pods got,
	// and EventsSeconds when the last one was seen, from the first exit.
	Events        int     `json:"events"`
	EventsSeconds float64 `json:"eventsSeconds"`
}

// profileSeconds is the CPU profile's length: the 5,000-pod burst takes
// 20 to 40 s on 2 cores.
const profileSeconds = 30

// Run brings up a control plane, fills it, and bursts the controller, then
// the yardstick.
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
	kube, kruise, err := clients(cp.RestConfig)
	if err != nil {
		return nil, err
	}
	if err := prepare(ctx, cp, kube, cfg); err != nil {
		return nil, err
	}

	bin, err := cluster.BuildController(ctx, cfg.Root)
	if err != nil {
		return nil, err
	}
	c := &cluster.Cluster{ControlPlane: cp}
	args := []string{fmt.Sprintf("--kube-api-qps=%g", cfg.QPS), fmt.Sprintf("--kube-api-burst=%d", cfg.Burst), fmt.Sprintf("--workers=%d", cfg.Workers)}
	if cfg.ProfileDir != "" {
		args = append(args, "--profiling")
	}
	ctl, err := c.StartController(ctx, bin, args...)
	if err != nil {
		return nil, err
	}
	defer ctl.Stop()
	time.Sleep(5 * time.Second) // let the initial list settle before reading memory
	rep.ControllerRSSInitial, _ = rssBytes(ctl.Process.PID)
	rep.ControllerHeapInitial = heap(ctx, ctl)
	logf("controller ready: RSS %s, heap %s", mib(rep.ControllerRSSInitial), mib(rep.ControllerHeapInitial))

	var opts burstOptions
	prof := &profiler{dir: cfg.ProfileDir, binary: bin, metricsURL: ctl.MetricsURL, logf: logf}
	profiled := make(chan struct{})
	if cfg.ProfileDir != "" {
		prof.take(ctx, "heap", "controller.heap.initial")
		// The profile covers the burst from the first main exit; the watches
		// it runs beside outlive the profile, so it gets its own context.
		opts.during = func(context.Context, *burst) {
			defer close(profiled)
			prof.take(ctx, fmt.Sprintf("profile?seconds=%d", profileSeconds), "controller.cpu.burst")
		}
	} else {
		close(profiled)
	}
	before, err := snapshot(ctx, ctl)
	if err != nil {
		return nil, err
	}
	if rep.Controller, err = runBurstWith(ctx, kube, kruise, "ctl", cfg.BurstPods, ctl.Process.PID, logf, opts); err != nil {
		return nil, err
	}
	<-profiled
	after, err := snapshot(ctx, ctl)
	if err != nil {
		return nil, err
	}
	rep.Breakdown = breakdown(before, after)
	logf("controller during the burst: %s", rep.Breakdown)
	rep.Events, rep.EventsSeconds = waitForEvents(ctx, kube, cfg.BurstPods, rep.Controller.FirstExit)
	logf("controller events: %d SidecarTerminating, the last seen %.1fs after the first main exit", rep.Events, rep.EventsSeconds)
	if cfg.ProfileDir != "" {
		prof.take(ctx, "heap", "controller.heap.after")
	}
	rep.Controller.Terminator = "sidecar-terminator"
	rep.ControllerHeapAfter = heap(ctx, ctl)
	time.Sleep(2 * time.Second) // the audit log is written in 1 s batches
	writes, err := cluster.MutatingRequests(audit, cluster.ControllerServiceAccountUser)
	if err != nil {
		return nil, err
	}
	rep.WritesPerPod = float64(len(writes)) / float64(cfg.BurstPods)
	rep.WriteKinds = kinds(writes)
	if err := ctl.Stop(); err != nil {
		return nil, err
	}

	yard, err := startYardstick(ctx, cp.Kubeconfig, runDir, cfg)
	if err != nil {
		return nil, err
	}
	defer yard.Process.Kill()
	time.Sleep(5 * time.Second)
	rep.YardstickRSSInitial, _ = rssBytes(yard.Process.Pid)
	if rep.Yardstick, err = runBurst(ctx, kube, kruise, "yard", cfg.BurstPods, yard.Process.Pid, logf); err != nil {
		return nil, err
	}
	rep.Yardstick.Terminator = "yardstick"
	if rep.Yardstick.P99 > 0 {
		rep.P99Ratio = rep.Controller.P99 / rep.Yardstick.P99
	}
	if rep.Yardstick.RSSBytesAfter > 0 {
		rep.RSSRatioAfter = float64(rep.Controller.RSSBytesAfter) / float64(rep.Yardstick.RSSBytesAfter)
	}
	return rep, nil
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
		if strings.Contains(filepath.Base(f), "containerrecreaterequests") {
			crr = append(crr, f)
		}
	}
	if err := cp.InstallCRDs(ctx, crr); err != nil {
		return err
	}
	if err := cp.ApplyControllerRBAC(ctx, cfg.Root); err != nil {
		return err
	}
	for name, labels := range map[string]map[string]string{
		NormalNode: nil, VirtualNodePrefix + "1": {"type": "virtual-kubelet"}, VirtualNodePrefix + "2": {"type": "virtual-kubelet"},
	} {
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
	fmt.Fprintf(&b, "Run %s on %s: burst of %d pods (half CRR, half image swap), %d background pods, %d idle Job pods; both terminators with %d workers, %g QPS.\n\n",
		r.Date, r.Machine, r.Config.BurstPods, r.Config.BackgroundPods, r.Config.IdleJobPods, r.Config.Workers, r.Config.QPS)
	fmt.Fprintf(&b, "| terminator | p50 | p90 | p99 | max | all Succeeded | mains' exits written in | not acted on | CPU s / 1000 pods | RSS after burst |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range []BurstResult{r.Controller, r.Yardstick} {
		fmt.Fprintf(&b, "| %s | %.2fs | %.2fs | %.2fs | %.2fs | %.1fs | %.1fs | %d | %.2f | %s |\n", x.Terminator, x.P50, x.P90, x.P99, x.Max,
			x.AllSucceededSeconds, x.ExitSpreadSeconds, x.NotActedOn, x.CPUSecondsPer1000, mib(x.RSSBytesAfter))
	}
	fmt.Fprintf(&b, "\n- p99 latency, controller / yardstick: **%.2f×**\n", r.P99Ratio)
	fmt.Fprintf(&b, "- controller writes per terminated pod (audit log, events and leases aside): **%.2f** (%s)\n", r.WritesPerPod, strings.Join(r.WriteKinds, ", "))
	fmt.Fprintf(&b, "- controller memory with the background pods, after the initial list: RSS **%s**, Go heap %s; after the burst: RSS %s, heap %s\n",
		mib(r.ControllerRSSInitial), mib(r.ControllerHeapInitial), mib(r.Controller.RSSBytesAfter), mib(r.ControllerHeapAfter))
	fmt.Fprintf(&b, "- events: %d of %d pods got their SidecarTerminating event, the last seen %.1fs after the first main exit\n", r.Events, r.Config.BurstPods, r.EventsSeconds)
	fmt.Fprintf(&b, "- where the controller's time went during the burst: %s\n", r.Breakdown)
	fmt.Fprintf(&b, "- yardstick RSS (untrimmed cache of every pod): %s after its initial list, %s after the burst; controller / yardstick after the burst: **%.2f×**\n",
		mib(r.YardstickRSSInitial), mib(r.Yardstick.RSSBytesAfter), r.RSSRatioAfter)
	return b.String()
}
