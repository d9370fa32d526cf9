package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profiler takes the controller's profiles through its /debug/pprof endpoint
// (the controller runs with --profiling) and renders each as `go tool pprof
// -top` text beside it, so a report says what bounds the burst.
type profiler struct {
	dir        string // where the profiles go
	binary     string // the controller binary, for symbols
	metricsURL string // http://127.0.0.1:port/metrics
	logf       func(string, ...any)
}

// take fetches one profile ("profile?seconds=N" for CPU, "heap", ...) into
// dir/name.pprof and dir/name.top.txt.
func (p *profiler) take(ctx context.Context, query, name string) {
	url := p.metricsURL[:len(p.metricsURL)-len("/metrics")] + "/debug/pprof/" + query
	if err := p.fetch(ctx, url, filepath.Join(p.dir, name+".pprof")); err != nil {
		p.logf("profile %s: %v", name, err)
		return
	}
	// The report is stdout alone: go and pprof write notes to stderr.
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=40", p.binary, filepath.Join(p.dir, name+".pprof"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	top, err := cmd.Output()
	if err != nil {
		p.logf("pprof -top %s: %v: %s", name, err, stderr.String())
		return
	}
	if err := os.WriteFile(filepath.Join(p.dir, name+".top.txt"), top, 0o644); err != nil {
		p.logf("write %s: %v", name, err)
	}
}

func (p *profiler) fetch(ctx context.Context, url, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
