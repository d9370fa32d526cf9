package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
