package reconciler

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Every counter series with a known label value exists at zero before any
// event, so that increase() and absent-data alerts see the first one.
func TestCountersStartAtZeroForEveryKnownLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetType() == dto.MetricType_COUNTER && m.GetCounter().GetValue() != 0 {
				t.Errorf("%s %v starts at %v", f.GetName(), m.GetLabel(), m.GetCounter().GetValue())
			}
			for _, l := range m.GetLabel() {
				if series[f.GetName()] == nil {
					series[f.GetName()] = map[string]bool{}
				}
				series[f.GetName()][l.GetName()+"="+l.GetValue()] = true
			}
		}
	}
	want := map[string][]string{
		"sidecar_terminator_failed_kills_total": {"method=" + string(decision.ActionCreateCRR), "method=" + string(decision.ActionSwapImage)},
		"sidecar_terminator_actions_total": {"method=" + string(decision.ActionCreateCRR), "method=" + string(decision.ActionSwapImage),
			"method=" + string(decision.ActionSettlePhase), "result=" + ResultSuccess, "result=" + ResultError,
			"result=" + ResultAlreadyDone, "result=" + ResultStale},
	}
	for _, r := range decision.WarningReasons() {
		want["sidecar_terminator_warnings_total"] = append(want["sidecar_terminator_warnings_total"], "reason="+r)
	}
	for _, v := range decision.Verdicts() {
		want["sidecar_terminator_decisions_total"] = append(want["sidecar_terminator_decisions_total"], "verdict="+string(v))
	}
	for name, labels := range want {
		for _, l := range labels {
			if !series[name][l] {
				t.Errorf("%s has no series with %s at start", name, l)
			}
		}
	}
}
