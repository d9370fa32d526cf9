package kube

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

func counterValue(t *testing.T, m *reconciler.Metrics, method, result string) float64 {
	t.Helper()
	return testutil.ToFloat64(m.Actions.WithLabelValues(method, result))
}
