package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The shipped clients have no client-side rate limiter: client-go builds none
// for a negative QPS. A positive --kube-api-qps builds one; 0, which client-go
// would read as its default of 5, is refused.
func TestClientLimiterOffByDefault(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	if _, err := o.ReconcilerConfig(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	c, err := NewClients(kubeconfig, o.QPS, o.Burst)
	if err != nil {
		t.Fatal(err)
	}
	if rl := c.Kube.CoreV1().RESTClient().GetRateLimiter(); rl != nil {
		t.Errorf("default pod client has a rate limiter (%T), want none", rl)
	}
	if rl := c.Kruise.AppsV1alpha1().RESTClient().GetRateLimiter(); rl != nil {
		t.Errorf("default CRR client has a rate limiter (%T), want none", rl)
	}

	c, err = NewClients(kubeconfig, 20, 40)
	if err != nil {
		t.Fatal(err)
	}
	if rl := c.Kube.CoreV1().RESTClient().GetRateLimiter(); rl == nil || rl.QPS() != 20 {
		t.Errorf("--kube-api-qps=20 gave limiter %v, want one at 20 QPS", rl)
	}

	for _, tc := range []struct {
		qps   float32
		burst int
		want  string
	}{
		{0, 10, "use -1"},
		{20, 0, "--kube-api-burst must be at least 1"},
	} {
		o := DefaultOptions()
		o.QPS, o.Burst = tc.qps, tc.burst
		if _, err := o.ReconcilerConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("qps %g burst %d: error %v, want one saying %q", tc.qps, tc.burst, err, tc.want)
		}
	}
}

// --kruise-daemon-grace reaches the reconciler's configuration, and a grace
// of zero or less, which would take every node whose daemon has not yet
// written its NodeImage for one without, is refused at start.
func TestKruiseDaemonGraceFlag(t *testing.T) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--kruise-daemon-grace=25s"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.ReconcilerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KruiseDaemonGrace != 25*time.Second {
		t.Errorf("reconciler grace %s, want 25s", cfg.KruiseDaemonGrace)
	}
	if d := DefaultOptions().KruiseDaemonGrace; d != reconciler.DefaultKruiseDaemonGrace {
		t.Errorf("default grace %s, want %s", d, reconciler.DefaultKruiseDaemonGrace)
	}
	for _, bad := range []time.Duration{0, -time.Second} {
		o := DefaultOptions()
		o.KruiseDaemonGrace = bad
		if _, err := o.ReconcilerConfig(); err == nil || !strings.Contains(err.Error(), "--kruise-daemon-grace") {
			t.Errorf("grace %s: error %v, want one naming --kruise-daemon-grace", bad, err)
		}
	}
}

// --crr-deadline under OpenKruise's minimum (its webhook refuses an
// activeDeadlineSeconds under 3) is refused at start rather than met as a
// refusal of every CRR; the minimum itself is accepted.
func TestCRRDeadlineUnderKruisesMinimumIsRefused(t *testing.T) {
	for _, tc := range []struct {
		deadline time.Duration
		ok       bool
	}{{decision.MinCRRDeadline - time.Millisecond, false}, {time.Second, false}, {decision.MinCRRDeadline, true}, {time.Minute, true}} {
		o := DefaultOptions()
		o.CRRDeadline = tc.deadline
		_, err := o.ReconcilerConfig()
		if tc.ok && err != nil {
			t.Errorf("--crr-deadline=%s refused: %v", tc.deadline, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "--crr-deadline")) {
			t.Errorf("--crr-deadline=%s: error %v, want one naming --crr-deadline", tc.deadline, err)
		}
	}
}
