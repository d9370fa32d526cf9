package kruisesuite

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster/clustertest"
)

// TerminatorEnv picks who stops the sidecars while OpenKruise's suite runs.
const TerminatorEnv = "KRUISE_E2E_TERMINATOR"

// The values of TerminatorEnv.
const (
	// Ours: this controller, under its own RBAC, with kruise-manager's
	// SidecarTerminator gate off (kruise-daemon executes its CRRs). The
	// default.
	Ours = "sidecar-terminator"
	// OpenKruise: kruise-manager's own SidecarTerminator, the calibration
	// run: the suite's workloads as their authors expect them to pass.
	OpenKruise = "openkruise"
	// Nobody: no terminator at all; the suite must fail (its first
	// workload's sidecar runs on), which shows that it tests something.
	Nobody = "none"
)

// Focus selects OpenKruise's SidecarTerminator spec: one ginkgo It that
// runs its seven workloads one after the other, each given 10 minutes.
const Focus = "SidecarTerminator"

func terminator(t *testing.T) string {
	switch v := os.Getenv(TerminatorEnv); v {
	case "", Ours:
		return Ours
	case OpenKruise, Nobody:
		return v
	default:
		t.Fatalf("%s=%q: want %s, %s or %s", TerminatorEnv, v, Ours, OpenKruise, Nobody)
		return ""
	}
}

// OpenKruise's own test/e2e at cluster.KruiseVersion, focused on its
// SidecarTerminator spec, run unmodified against the local real cluster
// with this controller doing the terminating: every one of its workloads
// (native Jobs under Never and OnFailure, a failing main, a sidecar that
// ignores SIGTERM with KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE,
// BroadcastJobs) must reach the state the suite expects.
func TestOpenKruiseSidecarTerminatorSuite(t *testing.T) {
	who := terminator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	e := clustertest.Up(ctx, t, cluster.UpOptions{Kruise: cluster.KruiseOptions{SidecarTerminator: who == OpenKruise}})
	// Cold, this is minutes of compiling; make test and make kruise-e2e
	// build it beforehand with the cluster's binaries (cluster build).
	t0 := time.Now()
	suite, err := cluster.KruiseE2ETestBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OpenKruise %s e2e test binary ready in %s: %s", cluster.KruiseVersion, time.Since(t0).Round(time.Second), suite)
	t1 := time.Now()
	tars, err := WriteImages(ctx, filepath.Join(e.RunDir, "kruise-e2e-images"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Node.ImportImages(ctx, tars...); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s and %s from Debian packages, imported in %s", BusyboxRef, NginxRef, time.Since(t1).Round(time.Millisecond))
	if who == Ours {
		if _, err := e.StartController(ctx, e.Bin); err != nil {
			t.Fatal(err)
		}
	}

	t.Logf("running OpenKruise's %s spec; sidecars stopped by: %s", Focus, who)
	logDir := filepath.Join(e.RunDir, "logs") // saved with the cluster's logs (E2E_LOGS_DIR)
	report := filepath.Join(logDir, "kruise-e2e-report.json")
	outPath := filepath.Join(logDir, "kruise-e2e.log")
	start := time.Now()
	runErr := runSuite(ctx, suite, e.Kubeconfig, report, outPath)
	wall := time.Since(start)

	r, err := readReport(report)
	if err != nil {
		t.Fatalf("suite (%v) left no readable report: %v\n%s", runErr, err, logTail(outPath, 80))
	}
	for _, w := range r.workloads {
		t.Logf("  %-70s %6.1fs", w.name, w.took.Seconds())
	}
	t.Logf("OpenKruise's %s spec: %s, %d workloads started, wall %s (suite process; the spec itself %s)",
		Focus, r.state, len(r.workloads), wall.Round(100*time.Millisecond), r.runTime.Round(100*time.Millisecond))
	if who == Ours {
		if lines := successfulActions(ctx, e.Controller.MetricsURL); len(lines) == 0 {
			t.Errorf("the controller's metrics show no successful action: someone else stopped the sidecars")
		} else {
			t.Logf("the controller's successful actions:\n  %s", strings.Join(lines, "\n  "))
		}
	}
	switch {
	case r.ran != 1:
		t.Fatalf("%d specs matched -ginkgo.focus=%s, want 1 (suite: %v)\n%s", r.ran, Focus, runErr, logTail(outPath, 80))
	case r.state != "passed" || runErr != nil:
		failed := "before the first workload"
		if n := len(r.workloads); n > 0 {
			failed = fmt.Sprintf("workload %d, %q", n, r.workloads[n-1].name)
		}
		t.Fatalf("OpenKruise's %s spec %s at %s (terminator: %s; suite: %v):\n%s\nlast lines of %s:\n%s",
			Focus, r.state, failed, who, runErr, r.failure, outPath, logTail(outPath, 40))
	}
}

// runSuite runs OpenKruise's e2e binary with only the SidecarTerminator
// focus, the cluster given by $KUBECONFIG (the only way it reads one), its
// output to outPath and ginkgo's JSON report to report.
func runSuite(ctx context.Context, bin, kubeconfig, report, outPath string) error {
	out, err := os.Create(outPath)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, bin,
		"-test.timeout=30m",
		"-ginkgo.focus="+Focus,
		"-ginkgo.v",
		"-ginkgo.no-color",
		"-ginkgo.json-report="+report,
	)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "KUBECONFIG="+kubeconfig)
	cmd.Dir = filepath.Dir(outPath)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}

type workload struct {
	name string
	took time.Duration
}

// result is what the JSON report says of the focused spec.
type result struct {
	ran       int // specs that ran (not skipped by the focus)
	state     string
	failure   string
	runTime   time.Duration
	workloads []workload
}

// readReport reads ginkgo's JSON report (ginkgo v2 types.Report). A
// workload is a By step followed at once by the suite's "Create job-..."
// step; it lasts until the next workload's step or the spec's end.
func readReport(path string) (result, error) {
	var reports []struct {
		SpecReports []struct {
			LeafNodeType string
			LeafNodeText string
			State        string
			StartTime    time.Time
			EndTime      time.Time
			RunTime      time.Duration
			Failure      struct{ Message string }
			SpecEvents   []struct {
				SpecEventType    string
				Message          string
				TimelineLocation struct{ Time time.Time }
			}
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return result{}, err
	}
	if err := json.Unmarshal(b, &reports); err != nil {
		return result{}, fmt.Errorf("parse %s: %w", path, err)
	}
	var r result
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			if s.LeafNodeType != "It" || s.State == "skipped" || s.State == "pending" {
				continue
			}
			r.ran++
			r.state, r.failure, r.runTime = s.State, s.Failure.Message, s.RunTime
			var starts []time.Time
			ev := s.SpecEvents[:0:0]
			for _, e := range s.SpecEvents {
				if e.SpecEventType == "By" {
					ev = append(ev, e)
				}
			}
			for i := 0; i+1 < len(ev); i++ {
				if strings.HasPrefix(ev[i+1].Message, "Create job-") {
					r.workloads = append(r.workloads, workload{name: ev[i].Message})
					starts = append(starts, ev[i].TimelineLocation.Time)
				}
			}
			for i := range starts {
				end := s.EndTime
				if i+1 < len(starts) {
					end = starts[i+1]
				}
				r.workloads[i].took = end.Sub(starts[i])
			}
		}
	}
	return r, nil
}

// successfulActions are the controller's sidecar_terminator_actions_total
// samples with result="success" and a non-zero count.
func successfulActions(ctx context.Context, url string) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "sidecar_terminator_actions_total{") || !strings.Contains(l, `result="success"`) {
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v > 0 {
			lines = append(lines, l)
		}
	}
	return lines
}

func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
