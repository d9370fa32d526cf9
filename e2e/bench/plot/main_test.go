package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// fixture is a two-round run of three terminators with known latencies.
func fixture() latencyFile {
	return latencyFile{Date: "2026-11-23T09:00:00Z", Commit: "abc1234", Rounds: [][]burstLatencies{
		{
			{Terminator: "sidecar-terminator", Seconds: []float64{0.012, 0.015, 0.02, 0.4}},
			{Terminator: "yardstick", Seconds: []float64{0.05, 0.05, 0.3, 1.5}},
			{Terminator: "OpenKruise v1.9.1, as shipped (QPS 30)", NotActedOn: 1, Seconds: []float64{2, 30, 90}},
		},
		{
			{Terminator: "sidecar-terminator", Seconds: []float64{0, 0.011, 0.013, 0.5}},
			{Terminator: "yardstick", Seconds: []float64{0.04, 0.06, 0.2, 2}},
			{Terminator: "OpenKruise v1.9.1, as shipped (QPS 30)", Seconds: []float64{1, 5, 40, 120}},
		},
	}}
}

func TestCDFCountsEveryPodAndMergesTies(t *testing.T) {
	for _, c := range []struct {
		name   string
		sorted []float64
		pods   int
		want   plotter.XYs
	}{
		{"nothing acted on", nil, 3, nil},
		{"one pod", []float64{0.5}, 1, plotter.XYs{{X: 0.5, Y: 0}, {X: 0.5, Y: 1}}},
		{"distinct", []float64{1, 2, 3, 4}, 4, plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.25}, {X: 2, Y: 0.5}, {X: 3, Y: 0.75}, {X: 4, Y: 1}}},
		{"ties make one step", []float64{1, 1, 1, 3}, 4, plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.75}, {X: 3, Y: 1}}},
		{"pods never acted on keep it below 1", []float64{1, 2}, 4, plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.25}, {X: 2, Y: 0.5}}},
	} {
		if got := cdf(c.sorted, c.pods); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: cdf(%v, %d) = %v, want %v", c.name, c.sorted, c.pods, got, c.want)
		}
	}
}

func TestThinKeepsRisesOfAtLeastDyAndTheLastPoint(t *testing.T) {
	pts := plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.1}, {X: 2, Y: 0.15}, {X: 3, Y: 0.25}, {X: 4, Y: 0.3}, {X: 5, Y: 0.32}}
	want := plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.1}, {X: 3, Y: 0.25}, {X: 5, Y: 0.32}}
	if got := thin(pts, 0.1); !reflect.DeepEqual(got, want) {
		t.Errorf("thin = %v, want %v", got, want)
	}
}

func TestPoolMergesRoundsInReportOrder(t *testing.T) {
	got := pool(fixture())
	want := []series{
		{name: "sidecar-terminator", seconds: []float64{0, 0.011, 0.012, 0.013, 0.015, 0.02, 0.4, 0.5}, pods: 8},
		{name: "yardstick", seconds: []float64{0.04, 0.05, 0.05, 0.06, 0.2, 0.3, 1.5, 2}, pods: 8},
		{name: "OpenKruise v1.9.1, as shipped (QPS 30)", seconds: []float64{1, 2, 5, 30, 40, 90, 120}, pods: 8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pool = %+v\nwant %+v", got, want)
	}
}

// TestSVGNamesEveryTerminatorAndTheRun: the SVG is written, its legend names
// each terminator (and the pod OpenKruise never acted on), its title the run,
// and drawing the same file twice gives the same bytes.
func TestSVGNamesEveryTerminatorAndTheRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench-latency.svg")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := render(w, fixture()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", ">sidecar-terminator</text>", ">yardstick</text>",
		">OpenKruise v1.9.1, as shipped (QPS 30) (1 of 8 pods never acted on)</text>",
		"2 rounds of 4 pods pooled", "run of 2026-11-23T09:00:00Z, commit abc1234"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	var again bytes.Buffer
	if err := render(&again, fixture()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(svg, again.Bytes()) {
		t.Error("the same latencies drew two different SVGs")
	}
}

func TestNothingActedOnIsAnError(t *testing.T) {
	for _, f := range []latencyFile{{}, {Rounds: [][]burstLatencies{{{Terminator: "x", NotActedOn: 5, Seconds: []float64{}}}}}} {
		if err := render(&bytes.Buffer{}, f); err == nil {
			t.Errorf("%+v drew a plot", f)
		}
	}
}

// TestScaleTierIsASecondPanel: with the scale tier's latencies the SVG is
// twice as tall and holds both panels' titles, the bench's above the scale
// tier's.
func TestScaleTierIsASecondPanel(t *testing.T) {
	scale := latencyFile{Date: "2026-11-27T12:00:00Z", Rounds: [][]burstLatencies{{
		{Terminator: "sidecar-terminator", Seconds: []float64{0.5, 1, 2}},
		{Terminator: "yardstick", Seconds: []float64{0.4, 1.2, 3}},
	}}}
	var one, two bytes.Buffer
	if err := render(&one, fixture()); err != nil {
		t.Fatal(err)
	}
	if err := render(&two, fixture(), scale); err != nil {
		t.Fatal(err)
	}
	height := func(svg string) string {
		i := strings.Index(svg, `height="`)
		if i < 0 {
			t.Fatalf("no height in %.200s", svg)
		}
		rest := svg[i+len(`height="`):]
		return rest[:strings.IndexByte(rest, '"')]
	}
	if h1, h2 := height(one.String()), height(two.String()); h1 == h2 {
		t.Errorf("two panels are as tall as one (%s)", h2)
	}
	s := two.String()
	first, second := strings.Index(s, "2 rounds of 4 pods pooled"), strings.Index(s, "1 round of 3 pods pooled")
	if first < 0 || second < 0 {
		t.Fatalf("SVG lacks a panel's title (bench at %d, scale at %d)", first, second)
	}
	if !strings.Contains(s, "run of 2026-11-27T12:00:00Z") {
		t.Error("SVG lacks the scale run's date")
	}
}
