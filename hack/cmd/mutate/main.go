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
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
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

// recheck: gremlins v0.6.0 runs a mutant only if Go's coverage profile has a
// block over its position, and the condition of a `case` in a tagless
// `switch` (or a constant) lies outside every block, so such a mutant is
// NOT COVERED even when the tests evaluate it. Each one is run against the
// package's own tests here, as gremlins would have run it.
