// Command plot draws make bench's action latencies: for each terminator, the
// fraction of its pods acted on within x seconds of their main container's
// exit (an empirical CDF), every round's burst pooled, into an SVG.
//
//	cd e2e/bench/plot && go run .   # make bench-plot
//
// The same latencies.json always gives the same SVG: nothing in it comes
// from the clock or the machine.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	vgdraw "gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// latencyFile is e2e/bench's LatencyFile (latencies.json), copied: this
// module does not require the root one, and with it Kubernetes' client.
type latencyFile struct {
	Date   string             `json:"date"`
	Commit string             `json:"commit"`
	Rounds [][]burstLatencies `json:"rounds"`
}

type burstLatencies struct {
	Terminator string    `json:"terminator"`
	NotActedOn int       `json:"notActedOn"`
	Seconds    []float64 `json:"seconds"` // sorted
}

func main() {
	// The defaults are relative to this module's directory, where go run
	// runs it; the Makefile passes absolute paths.
	in := flag.String("in", "../results/latencies.json", "latencies.json written by make bench")
	scaleIn := flag.String("scale-in", "../results/scale/latencies.json", "latencies.json written by make bench-scale: a second panel when it exists")
	out := flag.String("out", "../../../docs/bench-latency.svg", "the SVG to write")
	flag.Parse()
	f, err := readLatencies(*in)
	if err != nil {
		log.Fatal(err)
	}
	files := []latencyFile{f}
	switch scale, err := readLatencies(*scaleIn); {
	case err == nil:
		files = append(files, scale)
	case !errors.Is(err, fs.ErrNotExist):
		log.Fatal(err)
	}
	var svg bytes.Buffer // a failed drawing leaves the last SVG as it was
	if err := render(&svg, files...); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, svg.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

func readLatencies(path string) (latencyFile, error) {
	var f latencyFile
	j, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(j, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// series is one terminator's bursts, pooled.
type series struct {
	name    string
	seconds []float64 // sorted
	pods    int       // acted on or not
}

// pool merges each terminator's bursts over the rounds, in the order the
// terminators first appear (the report's: controller, yardstick, OpenKruise).
func pool(f latencyFile) []series {
	var out []series
	at := map[string]int{}
	for _, round := range f.Rounds {
		for _, b := range round {
			i, ok := at[b.Terminator]
			if !ok {
				i = len(out)
				at[b.Terminator] = i
				out = append(out, series{name: b.Terminator})
			}
			out[i].seconds = append(out[i].seconds, b.Seconds...)
			out[i].pods += len(b.Seconds) + b.NotActedOn
		}
	}
	for _, s := range out {
		sort.Float64s(s.seconds) // each burst's are sorted, their concatenation is not
	}
	return out
}

// cdf is the empirical distribution of sorted among pods: one point per
// distinct latency x, at the fraction of the pods acted on within x, after a
// first point at 0. Pods never acted on count in pods, so a terminator that
// left some alone stays below 1.
func cdf(sorted []float64, pods int) plotter.XYs {
	if len(sorted) == 0 || pods == 0 {
		return nil
	}
	pts := plotter.XYs{{X: sorted[0], Y: 0}}
	for i, x := range sorted {
		y := float64(i+1) / float64(pods)
		if x == pts[len(pts)-1].X && i > 0 {
			pts[len(pts)-1].Y = y
			continue
		}
		pts = append(pts, plotter.XY{X: x, Y: y})
	}
	return pts
}

// thin drops the points that rise less than dy above the last one kept (the
// last point always stays): 15,000 pods spread over minutes would make a
// megabyte of SVG path, and drawn as steps the thinned curve is never more
// than dy below the true one.
func thin(pts plotter.XYs, dy float64) plotter.XYs {
	if len(pts) <= 2 {
		return pts
	}
	out := plotter.XYs{pts[0]}
	for i, p := range pts[1:] {
		if p.Y-out[len(out)-1].Y >= dy || i == len(pts)-2 {
			out = append(out, p)
		}
	}
	return out
}

// minSeconds is where the log-scale axis starts: latencies.json holds whole
// milliseconds, so a latency under half of one reads 0, drawn at 1 ms.
const minSeconds = 0.001

// draw builds the plot of f.
func draw(f latencyFile) (*plot.Plot, error) {
	all := pool(f)
	p := plot.New()
	perBurst := 0
	if len(f.Rounds) > 0 && len(f.Rounds[0]) > 0 {
		perBurst = len(f.Rounds[0][0].Seconds) + f.Rounds[0][0].NotActedOn
	}
	rounds := fmt.Sprintf("%d rounds", len(f.Rounds))
	if len(f.Rounds) == 1 {
		rounds = "1 round"
	}
	p.Title.Text = fmt.Sprintf("Action latency: pods acted on within x of their main's exit, %s of %d pods pooled", rounds, perBurst)
	if run := runOf(f); run != "" {
		p.Title.Text += "\n" + run
	}
	p.X.Label.Text = "seconds from the main container's exit to the terminator's action (log scale)"
	p.Y.Label.Text = "fraction of the pods acted on"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	// The fractions end at 1; the band above is kept empty for the legend,
	// which can then cover no curve whatever the data.
	p.Y.Min, p.Y.Max = 0, 1.35
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"},
		{Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}})
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, s := range all {
		pts := thin(cdf(s.seconds, s.pods), 0.001)
		for j := range pts {
			pts[j].X = math.Max(pts[j].X, minSeconds)
		}
		l := &plotter.Line{XYs: pts, StepStyle: plotter.PostStep}
		l.LineStyle.Width = vg.Points(1.5)
		l.LineStyle.Color = plotutil.Color(i)
		l.LineStyle.Dashes = plotutil.Dashes(i) // told apart in grey too
		name := s.name
		if left := s.pods - len(s.seconds); left > 0 {
			name += fmt.Sprintf(" (%d of %d pods never acted on)", left, s.pods)
		}
		if len(pts) > 0 { // in the legend even if it never acted
			p.Add(l)
			drawn++
		}
		p.Legend.Add(name, l)
	}
	if drawn == 0 { // nor would the log scale have a range
		return nil, fmt.Errorf("no terminator acted on any pod in the latencies file")
	}
	return p, nil
}

// runOf names the run: its date and commit, as far as the file says.
func runOf(f latencyFile) string {
	switch {
	case f.Date != "" && f.Commit != "":
		return fmt.Sprintf("run of %s, commit %s", f.Date, f.Commit)
	case f.Date != "":
		return "run of " + f.Date
	case f.Commit != "":
		return "run at commit " + f.Commit
	}
	return ""
}

// panelHeight is each panel's height: the bench's tier and, below it when
// make bench-scale has run, the scale tier's.
const panelHeight = 5.5 * vg.Inch

// render writes the plots of files as SVG to w, one panel each, top to
// bottom.
func render(w io.Writer, files ...latencyFile) error {
	var plots []*plot.Plot
	for _, f := range files {
		p, err := draw(f)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return fmt.Errorf("no latencies to draw")
	}
	svg := vgsvg.New(9*vg.Inch, panelHeight*vg.Length(len(plots)))
	c := vgdraw.New(svg)
	// The background under the label and the margin too, not only under
	// the plot: on a dark page the SVG would show transparent strips.
	c.SetColor(plots[0].BackgroundColor)
	c.Fill(c.Rectangle.Path())
	for i, p := range plots {
		top := panelHeight * vg.Length(i)
		panel := vgdraw.Crop(c, 0, 0, c.Size().Y-top-panelHeight, -top)
		drawPanel(panel, p)
	}
	_, err := svg.WriteTo(w)
	return err
}

// drawPanel draws p into c, with its X label drawn here, not by the plot:
// gonum/plot v0.17 makes room for it as if it sat at the arithmetic mean of
// the axis' range, near the right end of a log scale, and so shrinks the
// data area by half the label's width; it is drawn at the centre all the
// same.
func drawPanel(c vgdraw.Canvas, p *plot.Plot) {
	label := p.X.Label
	p.X.Label.Text = ""
	p.BackgroundColor = nil
	// A margin on the right, for the last tick's label.
	p.Draw(vgdraw.Crop(c, 0, -vg.Points(12), label.TextStyle.Height(label.Text)+label.Padding, 0))
	c.FillText(label.TextStyle, vg.Point{X: c.Center().X, Y: c.Min.Y + label.TextStyle.FontExtents().Descent}, label.Text)
}
