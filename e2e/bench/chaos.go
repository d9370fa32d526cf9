package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// ChaosResult is one reliability run and the checks made after it.
type ChaosResult struct {
	Scenario string   `json:"scenario"`
	Pods     int      `json:"pods"`
	Seconds  float64  `json:"seconds"`
	Checks   []string `json:"checks"`
	Failures []string `json:"failures"`
	// Figures are a scenario's own numbers, for its report.
	Figures map[string]float64 `json:"figures,omitempty"`
}

// chaosScenario is one reliability run: a fault injected during a burst.
type chaosScenario struct {
	name    string
	purpose string
	args    []string // extra controller flags
	// replicas > 1 runs that many controllers with leader election.
	replicas int
	opts     func(w *chaosWorld) burstOptions
	// maxCRRs per pod: 1 unless the fault makes retries legitimate.
	maxCRRs int
	// setup, if set, runs once the control plane is prepared, before the
	// controller starts; check, after the common checks.
	setup func(ctx context.Context, w *chaosWorld) error
	check func(ctx context.Context, w *chaosWorld, res *ChaosResult)
}

// chaosWorld is the control plane and controllers of one scenario.
type chaosWorld struct {
	cfg     Config
	cp      *cluster.ControlPlane
	bin     string
	ctls    []*cluster.Controller
	audit   string
	restart func(ctx context.Context) error
	// kruiseDown is the kruise-manager-down scenario's state.
	kruiseDown *kruiseDown
	// outage is how long kube-apiserver was away (apiserver-restart).
	outage time.Duration
}

var chaosScenarios = []chaosScenario{
	{name: "kill-9-controller", purpose: "SIGKILL the controller a third into the burst, restart it: every pod completes, one CRR or patch each",
		maxCRRs: 1, opts: func(w *chaosWorld) burstOptions {
			return burstOptions{during: func(ctx context.Context, b *burst) {
				waitActed(ctx, b, len(b.pods)/3)
				_ = syscall.Kill(w.ctls[0].Process.PID, syscall.SIGKILL)
				_ = w.restart(ctx)
			}}
		}},
	{name: "leader-killed", purpose: "two replicas with leader election; SIGKILL the leader mid-burst: the standby finishes the burst",
		replicas: 2, maxCRRs: 1, args: []string{"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"},
		opts: func(w *chaosWorld) burstOptions {
			return burstOptions{during: func(ctx context.Context, b *burst) {
				waitActed(ctx, b, len(b.pods)/3)
				if l := w.leader(ctx); l != nil {
					_ = syscall.Kill(l.Process.PID, syscall.SIGKILL)
				}
			}}
		}},
	{name: "apiserver-restart", purpose: "restart kube-apiserver a third into the burst: the controller reconnects and every pod completes, one CRR or patch each",
		maxCRRs: 1, opts: func(w *chaosWorld) burstOptions {
			return burstOptions{during: func(ctx context.Context, b *burst) {
				waitActed(ctx, b, len(b.pods)/3)
				down := time.Now()
				if err := w.cp.RestartAPIServer(ctx, 5*time.Second); err != nil {
					w.cfg.Logf("restart kube-apiserver: %v", err)
					return
				}
				w.outage = time.Since(down)
				w.cfg.Logf("kube-apiserver restarted: serving again %.1fs after it was stopped, %.1fs into the burst", w.outage.Seconds(), time.Since(b.start).Seconds())
			}}
		},
		check: checkRestartRefusals},
	{name: "kruise-daemon-down-30s", purpose: "CRR-path sidecars stop only 30 s after the burst; --crr-deadline=10s, but a CRR's deadline is at least the pod's grace period (30 s) plus a margin, so the first CRR outlives the outage: one CRR per pod, no second stop during the first",
		maxCRRs: 1, args: []string{"--crr-deadline=10s", "--crr-retry-backoff=2s"},
		opts: func(*chaosWorld) burstOptions { return burstOptions{daemonDownFor: 30 * time.Second} }},
	{name: "pods-deleted-mid-way", purpose: "every 7th pod is deleted right after its main exits: the rest complete, nothing crashes",
		maxCRRs: 1, opts: func(*chaosWorld) burstOptions { return burstOptions{deleteEvery: 7} }},
	kruiseManagerDown,
}

// Chaos runs every reliability scenario (or the named one) on a fresh control plane.
func Chaos(ctx context.Context, cfg Config, only string) ([]ChaosResult, error) {
	var out []ChaosResult
	for _, sc := range chaosScenarios {
		if only != "" && sc.name != only {
			continue
		}
		cfg.Logf("chaos %s: %s", sc.name, sc.purpose)
		res, err := runChaos(ctx, cfg, sc)
		if err != nil {
			return out, fmt.Errorf("%s: %w", sc.name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func runChaos(ctx context.Context, cfg Config, sc chaosScenario) (ChaosResult, error) {
	res := ChaosResult{Scenario: sc.name, Pods: cfg.BurstPods}
	runDir, err := os.MkdirTemp("", "sidecar-terminator-chaos-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(runDir)
	w := &chaosWorld{cfg: cfg, audit: filepath.Join(runDir, "audit.log")}
	if w.cp, err = cluster.StartControlPlane(ctx, cluster.Options{AuditLogPath: w.audit, Logf: cfg.Logf}); err != nil {
		return res, err
	}
	defer w.cp.Stop()
	kube, kruise, err := clients(w.cp.RestConfig)
	if err != nil {
		return res, err
	}
	cfg.BackgroundPods, cfg.IdleJobPods = 0, 0
	cfg.Kruise = false // the chaos runs are the controller's alone: the CRR API only
	if err := prepare(ctx, w.cp, kube, cfg); err != nil {
		return res, err
	}
	if w.bin, err = cluster.BuildController(ctx, cfg.Root); err != nil {
		return res, err
	}
	if sc.setup != nil {
		if err := sc.setup(ctx, w); err != nil {
			return res, err
		}
	}
	args := append([]string{fmt.Sprintf("--kube-api-qps=%g", cfg.QPS), fmt.Sprintf("--kube-api-burst=%d", cfg.Burst)}, sc.args...)
	w.restart = func(ctx context.Context) error {
		ctl, err := (&cluster.Cluster{ControlPlane: w.cp}).StartController(ctx, w.bin, args...)
		if err == nil {
			w.ctls = append(w.ctls, ctl)
		}
		return err
	}
	for i := 0; i < max(1, sc.replicas); i++ {
		if err := w.restart(ctx); err != nil {
			return res, err
		}
	}
	defer func() {
		for i, c := range w.ctls {
			_ = c.Stop()
			keepLog(cfg, fmt.Sprintf("chaos-%s-%d.log", sc.name, i+1), c.Process.LogPath)
		}
	}()
	start := time.Now()
	burst, err := runBurstWith(ctx, kube, kruise, "chaos", cfg.BurstPods, w.ctls[0].Process.PID, cfg.Logf, sc.opts(w))
	if err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	time.Sleep(2 * time.Second) // the audit log is written in 1 s batches
	w.check(ctx, &res, burst, sc)
	if sc.check != nil {
		sc.check(ctx, w, &res)
	}
	return res, nil
}

// check asserts what must hold after any fault.
func (w *chaosWorld) check(ctx context.Context, res *ChaosResult, burst BurstResult, sc chaosScenario) {
	fail := func(format string, args ...any) { res.Failures = append(res.Failures, fmt.Sprintf(format, args...)) }
	pass := func(format string, args ...any) { res.Checks = append(res.Checks, fmt.Sprintf(format, args...)) }
	if burst.NotActedOn > 0 {
		fail("%d pods never completed (first: %s)", burst.NotActedOn, burst.FirstNotActedOn)
	} else {
		pass("every pod with a path completed; last Succeeded %.1fs after the first main exit", burst.AllSucceededSeconds)
	}
	writes, err := cluster.MutatingRequests(w.audit, cluster.ControllerServiceAccountUser)
	if err != nil {
		fail("audit log: %v", err)
		return
	}
	perPod := map[string]int{}
	crrsPerPod := map[string]int{}
	for _, wr := range writes {
		f := strings.Fields(wr)
		switch {
		case f[0] == "patch" && f[1] == "pods" && f[3] == "200":
			perPod[f[2]]++
		case f[0] == "create" && f[1] == "containerrecreaterequests" && f[3] == "201":
			crrsPerPod[f[2][:strings.LastIndex(f[2][:strings.LastIndex(f[2], "-")], "-")]]++
		}
	}
	if worst := maxValue(perPod); worst > 1 {
		fail("a sidecar's image was patched %d times", worst)
	} else {
		pass("at most one image patch per sidecar (%d patched)", len(perPod))
	}
	if worst := maxValue(crrsPerPod); worst > sc.maxCRRs {
		fail("a pod got %d CRRs (at most %d allowed here)", worst, sc.maxCRRs)
	} else {
		pass("at most %d CRR per pod (%d pods, %d CRRs)", max(worst, 1), len(crrsPerPod), sum(crrsPerPod))
	}
	kube, _, _ := clients(w.cp.RestConfig)
	pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=chaos"})
	if err != nil {
		fail("list pods: %v", err)
		return
	}
	touched := 0
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != "example.com/batch:1" {
			touched++
		}
	}
	if touched > 0 {
		fail("%d main containers were touched", touched)
	} else {
		pass("no main container touched (%d pods checked)", len(pods.Items))
	}
	succeeded := 0
	for _, wr := range writes {
		if code := wr[strings.LastIndex(wr, " ")+1:]; code == "200" || code == "201" {
			succeeded++
		}
	}
	w.checkMetrics(ctx, res, succeeded, sc)
}

// checkMetrics compares the actions the live controllers count with the
// writes the API server logged. A controller killed with SIGKILL takes its
// counts with it, so there the surviving process's counts are a lower bound.
func (w *chaosWorld) checkMetrics(ctx context.Context, res *ChaosResult, audited int, sc chaosScenario) {
	counted := 0.0
	for _, c := range w.ctls {
		if !c.Process.Alive() {
			continue
		}
		for _, m := range []string{"ContainerRecreateRequest", "ImageSwap"} {
			v, _ := c.Metric(ctx, fmt.Sprintf(`sidecar_terminator_actions_total{method=%q,result="success"}`, m))
			counted += v
		}
	}
	killed := len(w.ctls) > 1 || sc.replicas > 1
	switch {
	case !killed && int(counted) == audited:
		res.Checks = append(res.Checks, fmt.Sprintf("metrics account for every write: %d counted, %d successful in the audit log", int(counted), audited))
	case killed && int(counted) <= audited:
		res.Checks = append(res.Checks, fmt.Sprintf("surviving controller counted %d of the %d audited writes; the rest were made by the killed process", int(counted), audited))
	default:
		res.Failures = append(res.Failures, fmt.Sprintf("metrics count %d successful writes, the audit log %d", int(counted), audited))
	}
}

// leader finds the controller holding the Lease.
func (w *chaosWorld) leader(ctx context.Context) *cluster.Controller {
	kube, _, _ := clients(w.cp.RestConfig)
	lease, err := kube.CoordinationV1().Leases(cluster.ControllerNamespace).Get(ctx, cluster.ControllerName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return nil
	}
	for _, c := range w.ctls {
		if strings.HasSuffix(*lease.Spec.HolderIdentity, fmt.Sprintf("_%d", c.Process.PID)) {
			return c
		}
	}
	return nil
}

// waitActed waits until n pods of the burst were acted on.
func waitActed(ctx context.Context, b *burst, n int) {
	for ctx.Err() == nil {
		b.mu.Lock()
		acted := len(b.actAt)
		b.mu.Unlock()
		if acted >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func maxValue(m map[string]int) int {
	worst := 0
	for _, v := range m {
		worst = max(worst, v)
	}
	return worst
}

func sum(m map[string]int) int {
	total := 0
	for _, v := range m {
		total += v
	}
	return total
}

// keepLog copies a controller's log into cfg.LogDir, if one is set.
func keepLog(cfg Config, name, path string) {
	if cfg.LogDir == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		cfg.Logf("keep %s: %v", name, err)
		return
	}
	keep(cfg, name, data)
}

// keepTimeline writes a burst's timeline into cfg.LogDir, if one is set,
// beside the terminator's log.
func keepTimeline(cfg Config, name string, res BurstResult) {
	if cfg.LogDir == "" {
		return
	}
	keep(cfg, name, []byte(timelineTSV(res.timeline)))
}

func keep(cfg Config, name string, data []byte) {
	err := os.MkdirAll(cfg.LogDir, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(cfg.LogDir, name), data, 0o644)
	}
	if err != nil {
		cfg.Logf("keep %s: %v", name, err)
	}
}

// checkRestartRefusals: no retry storm while kube-apiserver restarts. The
// API server cannot count what it refused while it was away, so the
// controller's own log does: each refused write is a "Write refused" line
// naming the pod. A pod's write is retried after the short backoff,
// doubling; within the outage and the moment after it when the new API
// server still answers 403 (its RBAC caches unsynced), that allows only a
// few refusals per pod.
func checkRestartRefusals(_ context.Context, w *chaosWorld, res *ChaosResult) {
	perPod := map[string]int{}
	for _, c := range w.ctls {
		data, err := os.ReadFile(c.Process.LogPath)
		if err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("controller log: %v", err))
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, `"Write refused"`) {
				continue
			}
			if _, rest, ok := strings.Cut(line, ` pod="`); ok {
				pod, _, _ := strings.Cut(rest, `"`)
				perPod[pod]++
			}
		}
	}
	window := w.outage + 10*time.Second // the outage, then the 403s of unsynced RBAC caches
	allowed := refusalsWithin(window, decision.DefaultPolicy().RetryBackoff)
	worst := maxValue(perPod)
	msg := fmt.Sprintf("no retry storm: %d refused writes over %d pods while kube-apiserver was away %.1fs (at most %d for one pod; the backoff allows %d)",
		sum(perPod), len(perPod), w.outage.Seconds(), worst, allowed)
	if worst > allowed {
		res.Failures = append(res.Failures, msg)
		return
	}
	res.Checks = append(res.Checks, msg)
}

// refusalsWithin is how often one pod's write can be refused within w: the
// first refusal, then one per retry, each after the backoff, which starts
// at base and doubles.
func refusalsWithin(w, base time.Duration) int {
	n, at, step := 1, time.Duration(0), base
	for step > 0 && at+step <= w {
		at += step
		step *= 2
		n++
	}
	return n
}
