package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
