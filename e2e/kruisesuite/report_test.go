package kruisesuite

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A ginkgo v2 JSON report in the shape -ginkgo.json-report writes it
// (types.Report, SpecEvents of type "By"), cut to what readReport reads:
// the focused spec failed at its second workload; another spec was
// skipped by the focus.
const failedReport = `[{"SuiteDescription":"Kruise e2e suite","SpecReports":[
 {"LeafNodeType":"It","LeafNodeText":"should create a CloneSet","State":"skipped","RunTime":0},
 {"LeafNodeType":"It","LeafNodeText":"job and broadcast job with sidecar","State":"failed",
  "StartTime":"2026-11-25T15:00:00Z","EndTime":"2026-11-25T15:10:20Z","RunTime":620000000000,
  "Failure":{"Message":"Timed out after 600.001s.\nExpected\n    <bool>: false\nto be true"},
  "SpecEvents":[
   {"SpecEventType":"By","Message":"Creating a kubernetes client","TimelineLocation":{"Time":"2026-11-25T15:00:00Z"}},
   {"SpecEventType":"By","Message":"Building a namespace api object, basename sidecarterminator","TimelineLocation":{"Time":"2026-11-25T15:00:00.1Z"}},
   {"SpecEventType":"Node","Message":"","NodeType":"It","TimelineLocation":{"Time":"2026-11-25T15:00:00.2Z"}},
   {"SpecEventType":"By","Message":"native job, restartPolicy=Never","TimelineLocation":{"Time":"2026-11-25T15:00:00.5Z"}},
   {"SpecEventType":"By","Message":"Create job-abc","TimelineLocation":{"Time":"2026-11-25T15:00:00.5Z"}},
   {"SpecEventType":"By","Message":"native job, restartPolicy=Never, main succeeded, sidecar never stop","TimelineLocation":{"Time":"2026-11-25T15:00:12.5Z"}},
   {"SpecEventType":"By","Message":"Create job-abc","TimelineLocation":{"Time":"2026-11-25T15:00:12.5Z"}}
  ]}
]}]`

func TestReadReportFindsTheFocusedSpecAndItsWorkloads(t *testing.T) {
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, []byte(failedReport), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readReport(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.ran != 1 || r.state != "failed" || r.runTime != 620*time.Second {
		t.Errorf("ran %d, state %q, run time %s; want 1, failed, 10m20s", r.ran, r.state, r.runTime)
	}
	if len(r.workloads) != 2 {
		t.Fatalf("workloads %+v, want the two that started", r.workloads)
	}
	if w := r.workloads[0]; w.name != "native job, restartPolicy=Never" || w.took != 12*time.Second {
		t.Errorf("first workload %+v, want native job, restartPolicy=Never in 12s", w)
	}
	if w := r.workloads[1]; w.took != 10*time.Minute+7500*time.Millisecond {
		t.Errorf("second workload took %s, want until the spec's end, 10m7.5s", w.took)
	}
	if r.failure == "" {
		t.Error("the failure message is lost")
	}
}

func TestReadReportCountsNoSpecWhenTheFocusMatchesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, []byte(`[{"SpecReports":[{"LeafNodeType":"It","State":"skipped"}]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readReport(p)
	if err != nil || r.ran != 0 {
		t.Errorf("readReport = %+v, %v; want no spec run", r, err)
	}
}
