// Command bench measures the controller against the yardstick on a real
// kube-apiserver (see package e2e/bench). `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/bench"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "yardstick" {
		yardstick(os.Args[2:])
		return
	}
	chaos := len(os.Args) > 1 && os.Args[1] == "chaos"
	args := os.Args[1:]
	if chaos {
		args = args[1:]
	}
	cfg := bench.Config{Logf: log.Printf}
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.IntVar(&cfg.BurstPods, "pods", 5000, "pods in each burst")
	fs.IntVar(&cfg.BackgroundPods, "background", 50000, "restartPolicy Always pods in the cluster")
	fs.IntVar(&cfg.IdleJobPods, "idle-jobs", 1000, "Job pods whose mains keep running")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "bursts of each terminator, alternating which goes first")
	// By default the controller runs as shipped (its own defaults) and the
	// yardstick with as many workers and no client limit either.
	fs.IntVar(&cfg.Workers, "workers", app.DefaultWorkers, "workers of both terminators (default: the controller's shipped default)")
	fs.Float64Var(&cfg.ExitsPerSecond, "exits-per-second", 0, "pace the mains' exits at this rate, the same for every terminator; 0 writes them as fast as the API server takes them")
	fs.BoolVar(&cfg.ControllerAsMasters, "controller-as-masters", false, "a diagnostic: the controller authenticates as system:masters, as the yardstick does, instead of as its ServiceAccount")
	fs.IntVar(&cfg.YardstickWorkers, "yardstick-workers", 32, "the yardstick's workers (0: -workers); 32 is its better setting on this machine (bench.Config.YardstickWorkers)")
	qps := fs.Float64("qps", app.ClientLimitOff, "client QPS of both terminators; -1 (default, as shipped) is no client-side limiter")
	fs.IntVar(&cfg.Burst, "burst", app.ClientLimitOff, "client burst of both terminators; unused with -qps=-1")
	fs.BoolVar(&cfg.Kruise, "kruise", true, "also burst OpenKruise's own SidecarTerminator (kruise-manager "+cluster.KruiseVersion+", gate on): at its shipped client QPS and at -kruise-qps")
	fs.IntVar(&cfg.KruiseQPS, "kruise-qps", 1000, "kruise-manager's raised client QPS for its second column; 0 runs it as shipped only")
	fs.IntVar(&cfg.KruiseBurst, "kruise-burst", 2000, "kruise-manager's raised client burst (at least -kruise-qps)")
	fs.BoolVar(&cfg.KruiseRaisedOnly, "kruise-raised-only", false, "leave out kruise-manager's column at its shipped client QPS (the scale tier: at QPS 30 a 20,000-pod burst takes minutes)")
	fs.BoolVar(&cfg.SideBySide, "side-by-side", false, "run the controller and the yardstick through each round's one burst at once, each acting on its own half of the pods, instead of one burst each")
	fs.IntVar(&cfg.RotateBy, "rotate-by", 0, "move the rotation of which terminator goes first on by this many places (1: the yardstick first in round 1)")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "run the controller and kube-apiserver with --profiling and keep their profiles here (the controller's CPU and heap; kube-apiserver's CPU over each terminator's first burst, at most 50 s)")
	fs.StringVar(&cfg.LogDir, "log-dir", "", "keep the controllers' logs here (chaos runs, and each burst of the bench, with each burst's timeline: exits, actions and finished pods a second)")
	fs.IntVar(&cfg.ProfileSeconds, "profile-seconds", 30, "length of the controller's CPU profile, from the first main exit")
	out := fs.String("out", "e2e/bench/results", "directory for the results")
	scenario := fs.String("scenario", "", "chaos: run only this scenario")
	if chaos {
		cfg.BurstPods = 1000
	}
	fs.Parse(args)
	cfg.QPS = float32(*qps)
	root, err := filepath.Abs(".")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		log.Fatal("run from the repository root (make bench)")
	}
	cfg.Root = root
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if chaos {
		runChaos(ctx, cfg, *scenario, *out)
		return
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := rep.WriteFiles(*out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Markdown())
}

func yardstick(args []string) {
	fs := flag.NewFlagSet("yardstick", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig")
	ready := fs.String("ready-file", "", "touched once the cache has synced")
	workers := fs.Int("workers", 8, "workers")
	qps := fs.Float64("qps", 500, "client QPS")
	burst := fs.Int("burst", 1000, "client burst")
	fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := bench.RunYardstick(ctx, *kubeconfig, *workers, float32(*qps), *burst, *ready); err != nil {
		log.Fatal(err)
	}
}

func runChaos(ctx context.Context, cfg bench.Config, scenario, out string) {
	results, err := bench.Chaos(ctx, cfg, scenario)
	failed := err != nil
	for _, r := range results {
		fmt.Printf("\n%s (%d pods, %.0fs)\n", r.Scenario, r.Pods, r.Seconds)
		for _, c := range r.Checks {
			fmt.Printf("  ok    %s\n", c)
		}
		for _, f := range r.Failures {
			fmt.Printf("  FAIL  %s\n", f)
			failed = true
		}
	}
	if werr := bench.WriteJSON(filepath.Join(out, "chaos.json"), results); werr != nil {
		log.Print(werr)
	}
	if err != nil {
		log.Print(err)
	}
	if failed {
		os.Exit(1)
	}
}
