// Command cluster brings the local real cluster up and down from the shell:
//
//	go run ./e2e/cmd/cluster up [--run-dir DIR] [--controller] [--no-kruise] [--chart-images]
//	go run ./e2e/cmd/cluster status [--run-dir DIR]
//	go run ./e2e/cmd/cluster down [--run-dir DIR]
//	go run ./e2e/cmd/cluster build
//
// up prints the admin kubeconfig path as its last stdout line and exits,
// leaving the daemons running; their PID files are in DIR/pids, their logs
// in DIR/logs. down stops them by PID (from any process), undoes the host
// changes and fails if anything is left behind. build only builds (or finds
// cached) every binary the cluster runs: `make test` runs it before the e2e
// suites, so that a cold build is not counted in any test's own timeout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	runDir := fs.String("run-dir", cluster.DefaultRunDir, "state directory: PID files, logs, kubeconfigs")
	withController := fs.Bool("controller", false, "up: also build and start the sidecar-terminator controller with its own RBAC")
	noKruise := fs.Bool("no-kruise", false, "up: skip OpenKruise (kruise-manager, kruise-daemon, CRDs)")
	chartImages := fs.Bool("chart-images", false, "up: also build the controller image and import it under the tag the chart's defaults name, so the README's `helm install` runs as written")
	_ = fs.Parse(os.Args[2:])
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "up":
		err = up(ctx, *runDir, *withController, *noKruise, *chartImages)
	case "down":
		err = cluster.Down(*runDir)
		if err == nil {
			fmt.Fprintf(os.Stderr, "cluster in %s stopped; nothing left behind\n", *runDir)
		}
	case "status":
		err = status(*runDir)
	case "build":
		err = build(ctx)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up|down|status|build [--run-dir DIR] [--controller] [--no-kruise]")
	os.Exit(2)
}

// build builds what the cluster runs, each part timed, into the binary cache.
func build(ctx context.Context) error {
	for _, part := range []struct {
		name  string
		build func(context.Context) error
	}{
		{"etcd", func(ctx context.Context) error { _, err := cluster.EtcdBinary(ctx); return err }},
		{"Kubernetes", func(ctx context.Context) error { _, err := cluster.KubernetesBinaries(ctx); return err }},
		{"OpenKruise", func(ctx context.Context) error { _, err := cluster.KruiseBinaries(ctx); return err }},
		{"kwok", func(ctx context.Context) error { _, err := cluster.KwokBinary(ctx); return err }},
	} {
		t0 := time.Now()
		if err := part.build(ctx); err != nil {
			return fmt.Errorf("%s: %w", part.name, err)
		}
		fmt.Fprintf(os.Stderr, "cluster build: %s ready in %s\n", part.name, time.Since(t0).Round(time.Second))
	}
	return nil
}

func up(ctx context.Context, runDir string, withController, noKruise, chartImages bool) error {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "cluster up: "+format+"\n", args...) }
	c, err := cluster.Up(ctx, cluster.UpOptions{RunDir: runDir, NoKruise: noKruise, Logf: logf})
	if err != nil {
		return err
	}
	if chartImages {
		if err := importChartImage(ctx, c, logf); err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, stopErr)
			}
			return err
		}
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
	// The README's and the chart NOTES' commands want a kubectl; this
	// machine may have none, so point at the one built with the cluster.
	if kb, err := cluster.KubernetesBinaries(ctx, cluster.Kubectl); err == nil {
		logf("kubectl %s: %s", cluster.KubernetesVersion, kb[cluster.Kubectl])
	}
	fmt.Println(c.Kubeconfig)
	return nil
}

// importChartImage builds the controller image for this machine and imports
// it into the node under the reference the chart's defaults name.
func importChartImage(ctx context.Context, c *cluster.Cluster, logf func(string, ...any)) error {
	t0 := time.Now()
	root, err := repo.Root()
	if err != nil {
		return err
	}
	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		return err
	}
	ref, err := deploy.DefaultControllerImage(ctx, helm, root)
	if err != nil {
		return err
	}
	idx, err := oci.BuildIndex(ctx, root, images.Controller, []string{runtime.GOARCH})
	if err != nil {
		return err
	}
	tar := filepath.Join(c.RunDir, "controller-chart-image.tar")
	if err := oci.WriteIndexTarball(tar, ref, idx); err != nil {
		return err
	}
	if err := c.Node.ImportImages(ctx, tar); err != nil {
		return err
	}
	logf("controller image imported as %s (the chart's default): %s", ref, time.Since(t0).Round(time.Millisecond))
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
