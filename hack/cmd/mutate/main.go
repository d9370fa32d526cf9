// Command mutate is `make mutate`: mutation testing of the decision, the
// reconciler and the kube layer with gremlins (pinned under
// hack/tools/gremlins). Each package is mutated and tested with its own tests,
// as a per-package mutation score demands. gremlins runs a mutant only where
// Go's coverage profile has a block, which a tagless switch's case condition
// and a constant do not have, so each mutant it calls NOT COVERED is run
// against the package's tests here (-recheck); with -from (a report made from
// an earlier run's log) so is each survivor. Each mutant that survives is then
// tried against the simulator's tests (./sim), which drive the decision and
// the reconciler end to end. It writes e2e/bench/results/mutation.json
// and mutation.md: the scores, and every survivor with file:line and the
// argument for it (hack/cmd/mutate/survivors.txt), or "not argued".
//
// It is slow (a build and a test run per mutant) and is not part of make test.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

func main() {
	pkgs := flag.String("packages", "controller/decision,controller/reconciler,controller/kube", "packages to mutate, comma-separated")
	workers := flag.Int("workers", 1, "gremlins workers per package")
	coef := flag.Int("timeout-coefficient", 10, "gremlins: a mutant's test run may take this many times the coverage run")
	from := flag.String("from", "", "read gremlins' JSON from DIR/<package base>.json instead of running it")
	sim := flag.Bool("sim", true, "try each survivor against the simulator's tests")
	recheck := flag.Bool("recheck", true, "run each mutant gremlins calls NOT COVERED (with -from, each survivor) against the package's own tests")
	out := flag.String("out", "e2e/bench/results", "where mutation.json and mutation.md go")
	merge := flag.String("merge", "", "write one report from earlier reports' mutation.json files (comma-separated), in order, and run nothing")
	flag.Parse()
	if *merge != "" {
		if err := mergeReports(strings.Split(*merge, ","), *out); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, strings.Split(*pkgs, ","), *workers, *coef, *from, *sim, *recheck, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
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

// gremlinsOut is the part of gremlins' JSON output read here
// (github.com/go-gremlins/gremlins v0.6.0, internal/report/internal/structure.go).
type gremlinsOut struct {
	Files       []gFile `json:"files"`
	ElapsedTime float64 `json:"elapsed_time"`
}

type gFile struct {
	Filename  string      `json:"file_name"`
	Mutations []gMutation `json:"mutations"`
}

type gMutation struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

func run(ctx context.Context, pkgs []string, workers, coef int, from string, sim, recheck bool, out string) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	rep := Report{Generated: time.Now().UTC(), Tool: "github.com/go-gremlins/gremlins v0.6.0"}
	if c, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		rep.Commit = strings.TrimSpace(string(c))
	}
	args, err := readArguments(filepath.Join(root, "hack", "cmd", "mutate", "survivors.txt"))
	if err != nil {
		return err
	}
	var simDir string
	if sim || recheck {
		if simDir, err = copyRepo(ctx, root); err != nil {
			return err
		}
		defer os.RemoveAll(simDir)
	}
	for _, pkg := range pkgs {
		g, err := gremlins(ctx, root, pkg, workers, coef, from)
		if err != nil {
			return err
		}
		p := Package{Package: pkg, Elapsed: g.ElapsedTime}
		for _, f := range g.Files {
			file := f.Filename
			if !strings.Contains(file, "/") {
				file = pkg + "/" + file
			}
			for _, m := range f.Mutations {
				p.Counts.Total++
				switch m.Status {
				case "KILLED":
					p.Counts.Killed++
					continue
				case "TIMED OUT":
					p.Counts.TimedOut++
					continue
				case "NOT VIABLE":
					p.Counts.NotViable++
					continue
				case "LIVED":
					p.Counts.Lived++
				case "NOT COVERED":
					p.Counts.NotCovered++
				default:
					return fmt.Errorf("%s:%d: unknown status %q", file, m.Line, m.Status)
				}
				mu := Mutant{File: file, Line: m.Line, Column: m.Column, Type: m.Type, Status: m.Status,
					Argument: argumentFor(args, file, m)}
				if strings.HasPrefix(mu.Argument, "equivalent") {
					p.Counts.Equivalent++
				}
				// With -from, the run read may be older than the tests: its
				// survivors are run against today's tests too (the package's
				// code must be the run's; only tests added since).
				if recheck && (mu.Status == "NOT COVERED" || from != "") && !strings.HasPrefix(mu.Argument, "equivalent") {
					mu.Recheck = tryTests(ctx, simDir, mu, 3*time.Minute, "-tags", "mutate", "./"+pkg)
					fmt.Fprintf(os.Stderr, "%s:%d:%d %s: %s, own tests %s\n", mu.File, mu.Line, mu.Column, mu.Type, mu.Status, mu.Recheck)
					uncount := func() {
						if mu.Status == "LIVED" {
							p.Counts.Lived--
						} else {
							p.Counts.NotCovered--
						}
					}
					switch mu.Recheck {
					case "killed":
						// Killed by the package's tests: covered and detected,
						// whatever gremlins' coverage profile said.
						uncount()
						p.Counts.RecheckKilled++
						continue
					case "not viable":
						// Does not build (gremlins says NOT COVERED before it
						// builds): out of every count, as gremlins' NOT VIABLE.
						uncount()
						p.Counts.NotViable++
						continue
					}
				}
				if sim && !strings.HasPrefix(mu.Argument, "equivalent") {
					mu.Simulator = trySim(ctx, simDir, mu)
					if mu.Simulator == "killed" {
						p.Counts.KilledBySim++
					}
					fmt.Fprintf(os.Stderr, "%s:%d:%d %s: simulator %s\n", mu.File, mu.Line, mu.Column, mu.Type, mu.Simulator)
				}
				p.Mutants = append(p.Mutants, mu)
			}
		}
		p.Scores = scores(p.Counts)
		rep.Packages = append(rep.Packages, p)
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	return write(out, rep)
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

// gremlins runs it over one package, or reads an earlier run's output.
func gremlins(ctx context.Context, root, pkg string, workers, coef int, from string) (gremlinsOut, error) {
	var g gremlinsOut
	if from != "" {
		return readRuns(from, filepath.Base(pkg))
	}
	bin, err := toolbin.Path(ctx, "gremlins")
	if err != nil {
		return g, err
	}
	tmp, err := os.MkdirTemp("", "mutate")
	if err != nil {
		return g, err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "out.json")
	// The mutate tag leaves out tests of other packages' work (see
	// controller/decision/trim_skipped_test.go), which only slow each run.
	cmd := exec.CommandContext(ctx, bin, "unleash", "-t", "mutate", "--workers", fmt.Sprint(workers),
		"--timeout-coefficient", fmt.Sprint(coef), "-o", file, "./"+pkg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	// vet off: a mutant is killed by a failing test, not by vet; no DWARF:
	// faster links, hundreds of them.
	cmd.Env = append(os.Environ(), "GOFLAGS=-vet=off -ldflags=-w")
	fmt.Fprintf(os.Stderr, "== gremlins %s\n", pkg)
	if err := cmd.Run(); err != nil {
		return g, fmt.Errorf("gremlins %s: %w", pkg, err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return g, err
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("gremlins output %s: %w", file, err)
	}
	return g, nil
}

// readRuns merges earlier runs over one package, split by file (gremlins -E)
// to run side by side: DIR/<base>*.json, or, for a run that was stopped
// before it wrote its JSON, the mutants its log (DIR/<base>*.log) reports.
func readRuns(dir, base string) (gremlinsOut, error) {
	var all gremlinsOut
	logs, err := filepath.Glob(filepath.Join(dir, base+"*.log"))
	if err != nil {
		return all, err
	}
	for _, l := range logs {
		var g gremlinsOut
		jsonFile := strings.TrimSuffix(l, ".log") + ".json"
		if b, err := os.ReadFile(jsonFile); err == nil {
			if err := json.Unmarshal(b, &g); err != nil {
				return all, fmt.Errorf("%s: %w", jsonFile, err)
			}
		} else if g, err = parseLog(l); err != nil {
			return all, err
		}
		all.Files = append(all.Files, g.Files...)
		all.ElapsedTime += g.ElapsedTime
	}
	if len(all.Files) == 0 {
		return all, fmt.Errorf("no gremlins run for %s in %s", base, dir)
	}
	return all, nil
}

// parseLog reads gremlins' progress lines: "STATUS TYPE at file:line:col".
func parseLog(path string) (gremlinsOut, error) {
	var g gremlinsOut
	b, err := os.ReadFile(path)
	if err != nil {
		return g, err
	}
	byFile := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		status, rest, ok := strings.Cut(strings.TrimSpace(l), " at ")
		if !ok {
			continue
		}
		i := strings.LastIndex(status, " ")
		if i < 0 {
			continue
		}
		st, typ := strings.TrimSpace(status[:i]), status[i+1:]
		parts := strings.Split(rest, ":")
		if len(parts) != 3 {
			continue
		}
		var line, col int
		if _, err := fmt.Sscan(parts[1], &line); err != nil {
			continue
		}
		if _, err := fmt.Sscan(parts[2], &col); err != nil {
			continue
		}
		k, ok := byFile[parts[0]]
		if !ok {
			k = len(g.Files)
			byFile[parts[0]] = k
			g.Files = append(g.Files, gFile{Filename: parts[0]})
		}
		g.Files[k].Mutations = append(g.Files[k].Mutations, gMutation{Type: typ, Status: st, Line: line, Column: col})
	}
	return g, nil
}

// argumentFor finds a mutant's argument: "file:line:column TYPE" when two
// mutants of a type share a line, else "file:line TYPE".
func argumentFor(args map[string]string, file string, m gMutation) string {
	if a, ok := args[fmt.Sprintf("%s:%d:%d %s", file, m.Line, m.Column, m.Type)]; ok {
		return a
	}
	return args[fmt.Sprintf("%s:%d %s", file, m.Line, m.Type)]
}

// readArguments reads survivors.txt: "file:line[:column] TYPE: argument" per line.
func readArguments(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, arg, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("%s: want \"file:line TYPE: argument\", got %q", path, l)
		}
		out[key] = arg
	}
	return out, nil
}

// copyRepo copies the tracked files to a scratch module, where survivors are
// applied one at a time: the work tree is never changed.
func copyRepo(ctx context.Context, root string) (string, error) {
	dir, err := os.MkdirTemp("", "mutate-sim")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", "git ls-files -z | tar --null -T - -cf - | tar -xf - -C "+dir)
	cmd.Dir, cmd.Stderr = root, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("copy repository: %w", err)
	}
	return dir, nil
}

// The token each mutant type puts in place of the one found, as gremlins
// v0.6.0 does (internal/engine/mappings.go).
var swaps = map[string]map[token.Token]token.Token{
	"CONDITIONALS_BOUNDARY": {token.GTR: token.GEQ, token.GEQ: token.GTR, token.LSS: token.LEQ, token.LEQ: token.LSS},
	"CONDITIONALS_NEGATION": {token.EQL: token.NEQ, token.NEQ: token.EQL, token.GTR: token.LEQ, token.GEQ: token.LSS, token.LSS: token.GEQ, token.LEQ: token.GTR},
	"ARITHMETIC_BASE":       {token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL},
	"INCREMENT_DECREMENT":   {token.INC: token.DEC, token.DEC: token.INC},
	"INVERT_NEGATIVES":      {token.SUB: token.ADD},
}

// trySim runs the simulator's tests against the mutant.
func trySim(ctx context.Context, dir string, m Mutant) string {
	return tryTests(ctx, dir, m, 9*time.Minute, "./sim/...")
}

// recheck: gremlins v0.6.0 runs a mutant only if Go's coverage profile has a
// block over its position, and the condition of a `case` in a tagless
// `switch` (or a constant) lies outside every block, so such a mutant is
// NOT COVERED even when the tests evaluate it. Each one is run against the
// package's own tests here, as gremlins would have run it.

// tryTests applies the mutant in the scratch copy, runs go test with args,
// and puts the file back. A test run past timeout fails, and counts as a
// kill, as gremlins counts TIMED OUT.
func tryTests(ctx context.Context, dir string, m Mutant, timeout time.Duration, args ...string) string {
	path := filepath.Join(dir, m.File)
	src, err := os.ReadFile(path)
	if err != nil {
		return "not tried: " + err.Error()
	}
	mutated, err := applyMutant(src, m)
	if err != nil {
		return "not tried: " + err.Error()
	}
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return "not tried: " + err.Error()
	}
	defer os.WriteFile(path, src, 0o644)
	tctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(tctx, "go", append([]string{"test", "-count=1", "-failfast", "-timeout", timeout.String()}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-vet=off")
	outb, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return "lived"
	case strings.Contains(string(outb), "[build failed]"):
		return "not viable"
	default:
		return "killed"
	}
}

func applyMutant(src []byte, m Mutant) ([]byte, error) {
	fset := token.NewFileSet()
	f := fset.AddFile(m.File, -1, len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return nil, fmt.Errorf("no token at %d:%d", m.Line, m.Column)
		}
		p := fset.Position(pos)
		if p.Line != m.Line || p.Column != m.Column {
			continue
		}
		to, ok := swaps[m.Type][tok]
		if !ok {
			return nil, fmt.Errorf("%s at %d:%d is %s, which it does not change", m.Type, m.Line, m.Column, tok)
		}
		off := p.Offset
		out := append([]byte{}, src[:off]...)
		out = append(out, to.String()...)
		return append(out, src[off+len(tok.String()):]...), nil
	}
}
