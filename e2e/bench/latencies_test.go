package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLatencyFileRoundTrips: WriteFiles writes latencies.json beside
// latest.json, and reading it back gives every burst's latencies in table
// order, sorted and rounded to the millisecond, with the run's date and
// commit; latest.json does not carry them.
func TestLatencyFileRoundTrips(t *testing.T) {
	r := threeColumns()
	r.commit = "abc1234"
	r.Rounds[0].Controller.Latencies = []float64{0.0304, 0.0126, 0.0124, 0.9996}
	r.Rounds[0].Kruise[0].Latencies = []float64{12.3456}
	r.Rounds[1].Yardstick.Latencies = []float64{0.2, 0.0004}
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLatencies(filepath.Join(dir, "latencies.json"))
	if err != nil {
		t.Fatal(err)
	}
	kr0, kr1 := r.Kruise[0].Terminator, r.Kruise[1].Terminator
	want := LatencyFile{Date: "2026-11-23T09:00:00Z", Commit: "abc1234", Rounds: [][]BurstLatencies{
		{
			// to the nearest millisecond, 0.9996 up to a whole second
			{Terminator: "sidecar-terminator", Seconds: []float64{0.012, 0.013, 0.03, 1}},
			{Terminator: "yardstick", Seconds: []float64{}},
			{Terminator: kr0, NotActedOn: 1, Seconds: []float64{12.346}},
			{Terminator: kr1, Seconds: []float64{}},
		},
		{
			{Terminator: "sidecar-terminator", Seconds: []float64{}},
			{Terminator: "yardstick", Seconds: []float64{0, 0.2}},
			{Terminator: kr0, NotActedOn: 2, Seconds: []float64{}},
			{Terminator: kr1, Seconds: []float64{}},
		},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("latencies.json read back:\n got %+v\nwant %+v", got, want)
	}
	latest, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(latest), "atencies") || strings.Contains(string(latest), "abc1234") {
		t.Errorf("latest.json gained the latencies or the commit:\n%s", latest)
	}
}
