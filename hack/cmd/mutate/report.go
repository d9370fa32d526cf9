package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

// write puts the report in dir as mutation.json and mutation.md.
func write(dir string, rep Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "mutation.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Mutation testing\n\n")
	fmt.Fprintf(&md, "`make mutate` (%s) on commit %s, %s. Each package is mutated with gremlins' default mutants and tested with its own tests; "+
		"each mutant gremlins calls NOT COVERED is run against the package's own tests (gremlins' coverage misses the condition of a tagless switch's `case`), "+
		"and so is each survivor when the report is made from an earlier run (`-from`); "+
		"each survivor is then tried against the simulator's tests (`./sim/...`).\n\n", rep.Tool, rep.Commit, rep.Generated.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&md, "Killed: killed or timed out, of the covered mutants not argued equivalent (own tests), and of all viable non-equivalent mutants "+
		"(own tests plus the simulator). Covered: mutants some test of the package executes (or kills, though gremlins called them not covered), of the viable ones.\n\n")
	fmt.Fprintf(&md, "| package | mutants | killed | timed out | lived | not covered | killed on recheck by own tests | equivalent | killed by the simulator | killed %% (own tests) | killed %% (+ simulator) | covered %% |\n")
	fmt.Fprintf(&md, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range rep.Packages {
		c := p.Counts
		fmt.Fprintf(&md, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f | %.1f | %.1f |\n", p.Package, c.Total-c.NotViable, c.Killed, c.TimedOut,
			c.Lived, c.NotCovered, c.RecheckKilled, c.Equivalent, c.KilledBySim, p.Scores.KilledOwn, p.Scores.KilledWithSim, p.Scores.Covered)
	}
	fmt.Fprintf(&md, "\n## Survivors of the package's own tests\n\n")
	fmt.Fprintf(&md, "Arguments live in `hack/cmd/mutate/survivors.txt`.\n\n")
	fmt.Fprintf(&md, "| where | mutant | status | recheck by own tests | simulator | argument |\n|---|---|---|---|---|---|\n")
	n := 0
	for _, p := range rep.Packages {
		for _, m := range p.Mutants {
			arg := m.Argument
			if arg == "" {
				arg = "not argued"
			}
			fmt.Fprintf(&md, "| %s:%d:%d | %s | %s | %s | %s | %s |\n", m.File, m.Line, m.Column, m.Type, m.Status, m.Recheck, m.Simulator, strings.ReplaceAll(arg, "|", "\\|"))
			n++
		}
	}
	if n == 0 {
		fmt.Fprintf(&md, "| none | | | | | |\n")
	}
	return os.WriteFile(filepath.Join(dir, "mutation.md"), []byte(md.String()), 0o644)
}

// Report is mutation.json.
type Report struct {
	Generated time.Time `json:"generated"`
	Commit    string    `json:"commit"`
	Tool      string    `json:"tool"`
	Packages  []Package `json:"packages"`
}

// Package is one package's result.
type Package struct {
	Package string   `json:"package"`
	Counts  Counts   `json:"counts"`
	Mutants []Mutant `json:"mutants"`
	Elapsed float64  `json:"elapsed_seconds"`
	Scores  Scores   `json:"scores"`
}

// Counts are mutants by status. RecheckKilled: mutants gremlins calls NOT
// COVERED (or, with -from, LIVED in that run) that the package's own tests
// kill when they are run (see recheck); NotCovered and Lived count the rest.
type Counts struct {
	Total, Killed, TimedOut, Lived, NotCovered, NotViable, KilledBySim, Equivalent, RecheckKilled int
}

// Scores are percentages. KilledOwn: killed (or timed out) by the package's own
// tests, of the covered mutants not argued equivalent. KilledWithSim: the same,
// counting the simulator's kills. Covered: covered, of the viable mutants.
type Scores struct {
	KilledOwn, KilledWithSim, Covered float64
}

// Mutant is one mutant that was not killed by its package's tests.
type Mutant struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	Type      string `json:"type"`
	Status    string `json:"status"`              // LIVED or NOT COVERED
	Recheck   string `json:"recheck,omitempty"`   // NOT COVERED run against the package's own tests: killed, lived, or why not tried
	Simulator string `json:"simulator,omitempty"` // killed, lived, or why not tried
	Argument  string `json:"argument,omitempty"`
}

// mergeReports writes one report of the packages of earlier ones (runs of
// different packages, made at different times); the commit is the last one's.
func mergeReports(files []string, out string) error {
	var rep Report
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		rep.Generated, rep.Commit, rep.Tool = r.Generated, r.Commit, r.Tool
		rep.Packages = append(rep.Packages, r.Packages...)
	}
	if root, err := repo.Root(); err == nil && !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	return write(out, rep)
}

func scores(c Counts) Scores {
	pct := func(a, b int) float64 {
		if b <= 0 {
			return 100
		}
		return float64(int(1000*float64(a)/float64(b)+0.5)) / 10
	}
	detected := c.Killed + c.TimedOut + c.RecheckKilled
	// Equivalent mutants are out of every denominator: no test can kill them.
	covered := detected + c.Lived
	return Scores{
		KilledOwn:     pct(detected, covered-c.Equivalent),
		KilledWithSim: pct(detected+c.KilledBySim, c.Total-c.NotViable-c.Equivalent),
		Covered:       pct(covered, c.Total-c.NotViable),
	}
}
