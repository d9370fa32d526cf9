package kwok

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/bench"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// Report is a run of each terminator at one size.
type Report struct {
	Date       string   `json:"date"`
	Machine    string   `json:"machine"`
	Kubernetes string   `json:"kubernetes"`
	Kwok       string   `json:"kwok"`
	Kruise     string   `json:"openkruise"`
	Command    string   `json:"command"`
	Results    []Result `json:"results"`
	// Errors are the runs that failed, by terminator, as they failed.
	Errors map[Terminator]string `json:"errors,omitempty"`
}

// NewReport starts a report for command.
func NewReport(command string) *Report {
	return &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Kubernetes: cluster.KubernetesVersion,
		Kwok: cluster.KwokVersion, Kruise: cluster.KruiseVersion, Command: command}
}

func machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores, %s, shared", runtime.NumCPU(), mem)
}

// WriteFiles writes the report to dir as <name>.json and <name>.md.
func (r *Report) WriteFiles(dir, name string) error {
	if err := bench.WriteJSON(filepath.Join(dir, name+".json"), r); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(r.Markdown()), 0o644)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// Markdown renders the report's tables.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Jobs on kwok nodes through a real control plane\n\nRun %s on %s: Kubernetes %s (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), kwok %s, OpenKruise %s. `%s`.\n\n",
		r.Date, r.Machine, r.Kubernetes, r.Kwok, r.Kruise, r.Command)
	b.WriteString("Each Job: one main, ending exit 0 a set time after it runs (kwok's main-exit stage), and one sidecar marked `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE`, which kwok ends with exit 0 once its image is the quick-exit image. Every terminator meets a fresh control plane. Times are when the harness's watch saw each step.\n\n")
	b.WriteString("| terminator | nodes | Jobs | Complete | main exit → Job Complete p50 / p99 / max | terminator's share: main exit → image swap p50 / p99 | swap → pod Succeeded (kwok) p50 / p99 | pod Succeeded → Job Complete (Job controller) p50 / p99 |\n|---|---|---|---|---|---|---|---|\n")
	q := func(x Quantiles, withMax bool) string {
		if x.N == 0 {
			return "–"
		}
		if withMax {
			return fmt.Sprintf("%.2fs / %.2fs / %.2fs", x.P50, x.P99, x.Max)
		}
		return fmt.Sprintf("%.2fs / %.2fs", x.P50, x.P99)
	}
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d of %d | %s | %s | %s | %s |\n", x.Terminator, x.Nodes, x.Jobs, x.Complete, x.Jobs,
			q(x.ExitToComplete, true), q(x.ExitToWrite, false), q(x.WriteToSucceeded, false), q(x.SucceededToComplete, false))
	}
	b.WriteString("\nThe run's timeline, seconds from the first Job's create, and the terminator's cost:\n\n| terminator | Jobs created | all pods Running | all mains exited | all Jobs Complete | terminator peak RSS | terminator CPU | wall time | load before → after |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Results {
		rss, cpu := "–", "–"
		if x.Terminator != None {
			rss, cpu = mib(x.TerminatorPeakRSS), fmt.Sprintf("%.1fs (%.2fs per 1,000 Jobs)", x.TerminatorCPU, x.TerminatorCPU*1000/float64(x.Jobs))
		}
		complete := "–"
		if x.AllCompleteSec > 0 {
			complete = fmt.Sprintf("%.0fs", x.AllCompleteSec)
		}
		fmt.Fprintf(&b, "| %s | %.0fs | %.0fs | %.0fs | %s | %s | %s | %.0fs | %s → %s |\n", x.Terminator, x.SubmitSec, x.AllRunningSec, x.AllExitedSec,
			complete, rss, cpu, x.WallSec, x.LoadBefore, x.LoadAfter)
	}
	b.WriteString("\nPeak RSS (VmHWM) and CPU of each process over each run:\n\n| terminator |")
	var names []string
	if len(r.Results) > 0 {
		for _, p := range r.Results[0].Processes {
			names = append(names, p.Name)
		}
	}
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(names)) + "\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s |", x.Terminator)
		for _, n := range names {
			cell := "–"
			for _, p := range x.Processes {
				if p.Name == n {
					cell = fmt.Sprintf("%s, %.0f CPU-s", mib(p.PeakRSS), p.CPUSeconds)
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	for t, e := range r.Errors {
		fmt.Fprintf(&b, "\n**%s failed:** %s\n", t, e)
	}
	return b.String()
}
