// Command kwok runs Jobs on kwok nodes through a real control plane, once
// per terminator (this controller, OpenKruise's SidecarTerminator, none),
// and writes the results (e2e/kwok says what is measured):
//
//	go run ./e2e/cmd/kwok -nodes 1000 -jobs 10000
//
// make kwok-scale runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/kwok"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

func main() {
	nodes := flag.Int("nodes", 1000, "kwok nodes")
	jobs := flag.Int("jobs", 10000, "Jobs, each one main and one marked sidecar")
	mainExit := flag.Duration("main-exit", 5*time.Second, "how long each main runs once Running")
	workers := flag.Int("submit-workers", 32, "concurrent creates through the one client")
	stall := flag.Duration("stall", 5*time.Minute, "fail a run when no Job moves a step for this long")
	noneWatch := flag.Duration("none-watch", time.Minute, "with no terminator, how long to watch for a Job that completes once every main has exited")
	terms := flag.String("terminators", "sidecar-terminator,openkruise,none", "terminators to run, in order")
	out := flag.String("out", "e2e/bench/results", "results directory")
	name := flag.String("name", "", "results file name without extension (default kwok-<jobs>)")
	keep := flag.Bool("keep-run-dir", false, "keep each run's directory (logs)")
	flag.Parse()
	if *name == "" {
		*name = fmt.Sprintf("kwok-%d", *jobs)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s kwok: "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
	if err := run(ctx, *nodes, *jobs, *mainExit, *workers, *stall, *noneWatch, *terms, *out, *name, *keep, logf); err != nil {
		fmt.Fprintln(os.Stderr, "kwok:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, nodes, jobs int, mainExit time.Duration, workers int, stall, noneWatch time.Duration, terms, out, name string, keep bool, logf func(string, ...any)) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	bin, err := cluster.BuildController(ctx, root)
	if err != nil {
		return err
	}
	rep := kwok.NewReport(strings.Join(os.Args, " "))
	failed := false
	for _, t := range strings.Split(terms, ",") {
		res, err := kwok.Run(ctx, kwok.Config{Nodes: nodes, Jobs: jobs, Terminator: kwok.Terminator(t), MainExit: mainExit, SubmitWorkers: workers,
			Stall: stall, NoneWatch: noneWatch, ControllerBin: bin, Root: root, KeepRunDir: keep, Logf: logf})
		if res != nil {
			rep.Results = append(rep.Results, *res)
		}
		if err != nil {
			failed = true
			if rep.Errors == nil {
				rep.Errors = map[kwok.Terminator]string{}
			}
			rep.Errors[kwok.Terminator(t)] = err.Error()
			logf("%s failed: %v", t, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := rep.WriteFiles(out, name); err != nil {
		return err
	}
	fmt.Print(rep.Markdown())
	if failed {
		return fmt.Errorf("a run failed (see %s/%s.md)", out, name)
	}
	return nil
}
