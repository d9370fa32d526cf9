package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// profiler takes one process's profiles through its /debug/pprof endpoint
// and renders each as `go tool pprof -top` text beside it, so a report says
// what bounds the burst.
type profiler struct {
	dir    string // where the profiles go
	binary string // the profiled binary, for symbols; "" reads them from the profile
	// get opens /debug/pprof/<query> on the profiled process.
	get  func(ctx context.Context, query string) (io.ReadCloser, error)
	logf func(string, ...any)
}

// controllerProfiler reads the controller's profiles from its metrics
// server (it runs with --profiling).
func controllerProfiler(dir, binary, metricsURL string, logf func(string, ...any)) *profiler {
	base := strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/"
	return &profiler{dir: dir, binary: binary, logf: logf, get: func(ctx context.Context, query string) (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+query, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %s", base+query, resp.Status)
		}
		return resp.Body, nil
	}}
}

// apiServerProfiler reads kube-apiserver's profiles through an admin client
// (the control plane runs it with --profiling). Go profiles carry their
// symbols, so no binary is needed to read them.
func apiServerProfiler(dir string, kube kubernetes.Interface, logf func(string, ...any)) *profiler {
	return &profiler{dir: dir, logf: logf, get: func(ctx context.Context, query string) (io.ReadCloser, error) {
		return kube.CoreV1().RESTClient().Get().RequestURI("/debug/pprof/" + query).Stream(ctx)
	}}
}

// take fetches one profile ("profile?seconds=N" for CPU, "heap", ...) into
// dir/name.pprof and dir/name.top.txt.
func (p *profiler) take(ctx context.Context, query, name string) {
	path := filepath.Join(p.dir, name+".pprof")
	if err := p.fetch(ctx, query, path); err != nil {
		p.logf("profile %s: %v", name, err)
		return
	}
	args := []string{"tool", "pprof", "-top", "-nodecount=40"}
	if p.binary != "" {
		args = append(args, p.binary)
	}
	// The report is stdout alone: go and pprof write notes to stderr.
	cmd := exec.CommandContext(ctx, "go", append(args, path)...)
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

// fetchTimeout is how long a profile may take to arrive: a CPU profile's
// own length, and five minutes more for a process answering under a burst
// (a fixed five minutes lost every profile longer than that).
func fetchTimeout(query string) time.Duration {
	_, q, _ := strings.Cut(query, "?")
	v, _ := url.ParseQuery(q)
	seconds, _ := strconv.Atoi(v.Get("seconds"))
	return time.Duration(seconds)*time.Second + 5*time.Minute
}

func (p *profiler) fetch(ctx context.Context, query, path string) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout(query))
	defer cancel()
	body, err := p.get(ctx, query)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
