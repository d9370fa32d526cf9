package bench

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// LatencyFile is latencies.json: every burst's per-pod action latencies, for
// e2e/bench/plot (a module of its own, which reads this format with its own
// copy of these types: change both together).
type LatencyFile struct {
	Date   string `json:"date"`
	Commit string `json:"commit,omitempty"`
	// Rounds hold each round's bursts, in the report's table order
	// (controller, yardstick, then OpenKruise's columns).
	Rounds [][]BurstLatencies `json:"rounds"`
}

// BurstLatencies is one terminator's burst.
type BurstLatencies struct {
	Terminator string `json:"terminator"`
	// NotActedOn counts the pods the terminator never acted on: a
	// distribution of the acted-on alone would hide them.
	NotActedOn int `json:"notActedOn"`
	// Seconds from each main's exit to the action, sorted, rounded to the
	// millisecond: the watch that sees the action is no finer, and whole
	// milliseconds keep the file at about 6 bytes a pod.
	Seconds []float64 `json:"seconds"`
}

// LatencyFile gathers the run's per-pod latencies.
func (r *Report) LatencyFile() LatencyFile {
	f := LatencyFile{Date: r.Date, Commit: r.commit, Rounds: [][]BurstLatencies{}}
	for _, round := range r.Rounds {
		var bs []BurstLatencies
		for _, x := range round.bursts() {
			s := make([]float64, len(x.Latencies))
			for i, v := range x.Latencies {
				s[i] = math.Round(v*1000) / 1000
			}
			sort.Float64s(s) // rounding keeps the order; a caller's unsorted input does not
			bs = append(bs, BurstLatencies{Terminator: x.Terminator, NotActedOn: x.NotActedOn, Seconds: s})
		}
		f.Rounds = append(f.Rounds, bs)
	}
	return f
}

// WriteLatencies writes f to path, unindented: indented, each number takes
// a line of its own.
func WriteLatencies(path string, f LatencyFile) error {
	j, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(j, '\n'), 0o644)
}

// ReadLatencies reads a file WriteLatencies wrote.
func ReadLatencies(path string) (LatencyFile, error) {
	var f LatencyFile
	j, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	err = json.Unmarshal(j, &f)
	return f, err
}

// gitCommit is the short commit the run was built from, "-dirty" when the
// work tree had changes; empty outside a git checkout.
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if err := exec.Command("git", "-C", root, "diff", "--quiet", "HEAD").Run(); err != nil {
		c += "-dirty"
	}
	return c
}
