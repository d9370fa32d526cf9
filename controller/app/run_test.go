package app

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsMuxServesProfilesOnlyWhenAsked(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		mux := metricsMux(prometheus.NewRegistry(), profiling)
		for path, wantOn := range map[string]int{
			"/metrics":               http.StatusOK,
			"/debug/pprof/":          http.StatusOK,
			"/debug/pprof/heap":      http.StatusOK,
			"/debug/pprof/cmdline":   http.StatusOK,
			"/debug/pprof/goroutine": http.StatusOK,
		} {
			want := wantOn
			if !profiling && path != "/metrics" {
				want = http.StatusNotFound
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != want {
				t.Errorf("profiling=%v GET %s: %d, want %d", profiling, path, rec.Code, want)
			}
		}
	}
}
