package reconciler_test

import (
	"strings"
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kruisetest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

const defaultQuickExit = "ghcr.io/sidecar-terminator/quick-exit:default"

// The operator's default quick-exit image reaches a sidecar with no image of
// its own through the reconciler wherever no CRR path exists: OpenKruise not
// installed, or its webhook refusing the CRR (403 with the KruiseDaemon
// feature gate off, 500 with kruise-manager down, 404 after the CRD went).
// Where the CRR is admitted, the default is never written.
func TestDefaultImageWhereNoCRRPath(t *testing.T) {
	for name, tc := range map[string]struct {
		crrAPI       bool
		refusal      error
		defaultImage string
		want         []string // writes: "crr" for the create, "swap"
	}{
		"no OpenKruise, default set: swapped":                   {defaultImage: defaultQuickExit, want: []string{"swap"}},
		"no OpenKruise, no default: nothing written":            {want: nil},
		"feature gate off (403), default set: CRR then swap":    {crrAPI: true, refusal: kruisetest.FeatureGateOff(), defaultImage: defaultQuickExit, want: []string{"crr", "swap"}},
		"kruise-manager down (500), default set: CRR then swap": {crrAPI: true, refusal: kruisetest.WebhookDown(), defaultImage: defaultQuickExit, want: []string{"crr", "swap"}},
		"CRD removed (404), default set: CRR then swap":         {crrAPI: true, refusal: kruisetest.CRDGone(), defaultImage: defaultQuickExit, want: []string{"crr", "swap"}},
		"feature gate off (403), no default: only the CRR":      {crrAPI: true, refusal: kruisetest.FeatureGateOff(), want: []string{"crr"}},
		"CRR admitted, default set: only the CRR":               {crrAPI: true, defaultImage: defaultQuickExit, want: []string{"crr"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(jobPod(markCRR))
			f.w.crrAPI = tc.crrAPI
			cfg := reconciler.DefaultConfig()
			cfg.Policy.DefaultQuickExitImage = tc.defaultImage
			f.rec = reconciler.New(cfg, f.w, f.w, f.w, f.ev, f.metrics, f.clock)
			crr := "crr " + decision.CRRName(f.w.pod, 1)
			if tc.refusal != nil {
				f.w.answers[crr] = []error{tc.refusal}
			}
			f.sync(t)
			var got []string
			for _, s := range f.w.sent {
				got = append(got, strings.Fields(s)[0])
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("writes %v, want %v", f.w.sent, tc.want)
			}
			for _, p := range f.w.patches {
				if !strings.Contains(p, `"value":"`+defaultQuickExit+`"`) {
					t.Errorf("swap patch does not write the default image: %s", p)
				}
			}
			if tc.want == nil && len(f.ev.warnings(decision.ReasonNoTerminationPath)) != 1 {
				t.Errorf("no path and no NoTerminationPath Warning: %+v", f.ev.list)
			}
		})
	}
}
