package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

func median(sorted []float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	if len(sorted)%2 == 1 {
		return sorted[len(sorted)/2]
	}
	return (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
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
