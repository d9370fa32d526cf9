// Command sim runs the deterministic simulator's scenarios against the real
// reconciler and decision code, and prints a table of results.
//
//	go run ./sim/cmd/sim                          # every scenario, seed 1
//	go run ./sim/cmd/sim --scenario job-never-crr --seeds 20
//	go run ./sim/cmd/sim --scenario mixed-cluster --pods 100000
//	go run ./sim/cmd/sim --soak-pods 1000000      # random faults until 10^6 pods
//	go run ./sim/cmd/sim --scenario X --seed S --trace-pod POD   # replay one pod
//	go run ./sim/cmd/sim --free-writes            # API calls cost the worker nothing
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/sim"
)

// soakPodsPerRun keeps each soak run small: many seeds, many fault mixes.
const soakPodsPerRun = 2000

func main() {
	scenario := flag.String("scenario", "all", "scenario name, or all")
	seed := flag.Uint64("seed", 1, "first seed")
	seeds := flag.Int("seeds", 1, "number of seeds to sweep from --seed")
	pods := flag.Int("pods", 0, "pods per run (0: the scenario's own)")
	trace := flag.Bool("trace", false, "print every trace line")
	tracePod := flag.String("trace-pod", "", "print the trace lines of this pod only")
	soakPods := flag.Int("soak-pods", 0, "soak: run random-fault scenarios over seeds until this many pods were simulated")
	list := flag.Bool("list", false, "list the scenarios and exit")
	writeCost := flag.Duration("write-cost", 0, "worker time each API call of a sync costs (0: the scenario's own, the measured 4ms unless it says otherwise)")
	freeWrites := flag.Bool("free-writes", false, "API calls cost the worker nothing (the model before the measured write cost)")
	flag.Parse()
	// The simulator holds a whole cluster in memory and allocates as it
	// goes; trading memory for fewer GC cycles is right for a batch run.
	debug.SetGCPercent(400)

	if *list {
		for _, sc := range sim.Scenarios {
			fmt.Printf("%-28s %s\n", sc.Name, sc.Purpose)
		}
		return
	}
	if *soakPods > 0 {
		os.Exit(soak(*seed, *soakPods, *pods, sim.Options{WriteCost: *writeCost, FreeWrites: *freeWrites}))
	}
	scenarios, err := pick(*scenario, *seed, *pods)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts := sim.Options{Pods: *pods, TracePod: *tracePod, WriteCost: *writeCost, FreeWrites: *freeWrites}
	if *trace || *tracePod != "" {
		opts.TraceOut = os.Stdout
	}
	var results []*sim.Result
	failed := false
	for _, sc := range scenarios {
		for i := 0; i < *seeds; i++ {
			r := sim.New(sc, *seed+uint64(i), opts).Run()
			results = append(results, r)
			failed = failed || r.Violation != nil
		}
	}
	if err := sim.WriteTable(os.Stdout, results); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// pick returns the scenarios a run asked for by name.
func pick(name string, seed uint64, pods int) ([]sim.Scenario, error) {
	switch name {
	case "all":
		return sim.Scenarios, nil
	case "soak":
		// A soak run's scenario is drawn from its seed: replay one at a time.
		if pods == 0 {
			pods = soakPodsPerRun
		}
		return []sim.Scenario{sim.SoakScenario(seed, pods)}, nil
	}
	sc, err := sim.Lookup(name)
	if err != nil {
		return nil, err
	}
	return []sim.Scenario{sc}, nil
}

// soak sweeps seeds over random-fault scenarios until target pods ran.
func soak(seed uint64, target, perRun int, opts sim.Options) int {
	if perRun == 0 {
		perRun = soakPodsPerRun
	}
	start := time.Now()
	total, runs, safety, liveness := 0, 0, 0, 0
	for s := seed; total < target; s++ {
		sc := sim.SoakScenario(s, perRun)
		r := sim.New(sc, s, opts).Run()
		total += r.Pods
		runs++
		if v := r.Violation; v != nil {
			if v.Kind == "safety" {
				safety++
			} else {
				liveness++
			}
			fmt.Printf("%s (%s)\n%s\n", r.Summary(), sc.Purpose, v)
		}
		if runs%10 == 0 {
			fmt.Printf("soak: %d runs, %d pods, %d safety and %d liveness violations, %s\n", runs, total, safety, liveness, time.Since(start).Round(time.Second))
		}
	}
	fmt.Printf("soak done: %d runs (seeds %d..%d), %d pods, %d safety violations, %d liveness violations, wall %s\n",
		runs, seed, seed+uint64(runs)-1, total, safety, liveness, time.Since(start).Round(time.Second))
	if safety > 0 || liveness > 0 {
		return 1
	}
	return 0
}
