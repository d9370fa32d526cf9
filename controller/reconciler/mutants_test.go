package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The CRR carries the pod's own grace period in seconds (kruise-daemon's
// stop waits that long before SIGKILL), its deadline covers that grace, and
// a CRR outside a stop order has no stage label: kruise's webhook would
// default the grace to the pod's, and the stage label is what a later sync
// reads to know which stage a CRR stopped.
func TestCRRCarriesThePodsGraceAndNoStageOutsideAStopOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace *int64
		want  int64
	}{
		{"pod default", nil, 30},
		{"pod's own", int64p(95), 95},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := donePod("p", "normal", markCRR)
			pod.Spec.TerminationGracePeriodSeconds = tc.grace
			a, rec, _ := newAPI(t, pod)
			mustSync(t, rec, "p")
			if len(a.crrs) != 1 {
				t.Fatalf("CRRs %d, want 1", len(a.crrs))
			}
			c := a.crrs[0]
			if g := c.Spec.Strategy.TerminationGracePeriodSeconds; g == nil || *g != tc.want {
				t.Errorf("terminationGracePeriodSeconds %s, want %d", show(g), tc.want)
			}
			if d := c.Spec.ActiveDeadlineSeconds; d == nil || time.Duration(*d)*time.Second != decision.CRRDeadline(pod, reconciler.DefaultConfig().Policy) || *d <= tc.want {
				t.Errorf("activeDeadlineSeconds %s, want the decision's deadline, past the grace of %ds", show(d), tc.want)
			}
			if s, ok := c.Labels[reconciler.LabelStage]; ok {
				t.Errorf("stage label %q on a CRR outside a stop order", s)
			}
		})
	}
}

func int64p(v int64) *int64 { return &v }

func show(v *int64) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(*v)
}
