// Command cluster brings the local real cluster up and down from the shell:
//
//	go run ./e2e/cmd/cluster up [--run-dir DIR] [--controller] [--no-kruise]
//	go run ./e2e/cmd/cluster status [--run-dir DIR]
//	go run ./e2e/cmd/cluster down [--run-dir DIR]
//
// up prints the admin kubeconfig path as its last stdout line and exits,
// leaving the daemons running; their PID files are in DIR/pids, their logs
// in DIR/logs. down stops them by PID (from any process), undoes the host
// changes and fails if anything is left behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	runDir := fs.String("run-dir", cluster.DefaultRunDir, "state directory: PID files, logs, kubeconfigs")
	withController := fs.Bool("controller", false, "up: also build and start the sidecar-terminator controller with its own RBAC")
	noKruise := fs.Bool("no-kruise", false, "up: skip OpenKruise (kruise-manager, kruise-daemon, CRDs)")
	_ = fs.Parse(os.Args[2:])
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "up":
		err = up(ctx, *runDir, *withController, *noKruise)
	case "down":
		err = cluster.Down(*runDir)
		if err == nil {
			fmt.Fprintf(os.Stderr, "cluster in %s stopped; nothing left behind\n", *runDir)
		}
	case "status":
		err = status(*runDir)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up|down|status [--run-dir DIR] [--controller] [--no-kruise]")
	os.Exit(2)
}

func up(ctx context.Context, runDir string, withController, noKruise bool) error {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "cluster up: "+format+"\n", args...) }
	c, err := cluster.Up(ctx, cluster.UpOptions{RunDir: runDir, NoKruise: noKruise, Logf: logf})
	if err != nil {
		return err
	}
	if withController {
		if err := startController(ctx, c); err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, stopErr)
			}
			return err
		}
		logf("controller running: metrics %s, logs %s", c.Controller.MetricsURL, c.Controller.Process.LogPath)
	}
	fmt.Println(c.Kubeconfig)
	return nil
}

func startController(ctx context.Context, c *cluster.Cluster) error {
	_, err := c.BuildAndStartController(ctx)
	return err
}

func status(runDir string) error {
	procs, err := cluster.ReadPIDFiles(runDir)
	if err != nil {
		return err
	}
	if len(procs) == 0 {
		fmt.Printf("no cluster running in %s\n", runDir)
		return nil
	}
	fmt.Printf("kubeconfig: %s\n", filepath.Join(runDir, "kubeconfigs", "admin"))
	for _, p := range procs {
		fmt.Printf("%-24s pid %-7d log %s\n", p.Name, p.PID, p.LogPath)
	}
	return nil
}
