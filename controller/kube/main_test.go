package kube

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

func TestMain(m *testing.M) {
	// kruise-api's generated fake clientset predates watch-list streaming and
	// never sends the initial bookmark that client-go now waits for; real API
	// servers do. client-go reads this gate from the environment on first use.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

func counterValue(t *testing.T, m *reconciler.Metrics, method, result string) float64 {
	t.Helper()
	return testutil.ToFloat64(m.Actions.WithLabelValues(method, result))
}
