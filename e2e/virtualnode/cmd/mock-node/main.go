// Command mock-node runs one or more mock virtual-kubelet nodes against a
// cluster. Pods pinned to them (nodeSelector type=virtual-kubelet and a
// toleration of virtual-kubelet.io/provider=mock:NoSchedule) run as the
// workload image's argv says, without processes; an image change restarts
// the container with the new image, which is how the controller stops
// sidecars on serverless nodes.
//
//	mock-node --kubeconfig K --nodes virtual-1,virtual-2 [--pull-delay 500ms] [--unpullable IMG,...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/virtualnode"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/virtualnode/provider"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "mock-node: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	pcfg := provider.DefaultConfig("")
	fs := flag.NewFlagSet("mock-node", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of an identity allowed to act as a node")
	nodes := fs.String("nodes", "mock-virtual-node", "comma-separated node names, each optionally name=profile (restart, eci, aci, vk-mock: the provider it plays); all run in this process")
	maxPods := fs.Int("max-pods", 5000, "pod capacity of each node")
	workers := fs.Int("workers", 0, "pod sync workers per node (0: 2 per CPU)")
	workload := fs.String("workload-images", provider.DefaultWorkloadImage, "comma-separated images whose argv is the workload grammar; they pull")
	quickExit := fs.String("quick-exit-images", provider.DefaultQuickExitImage, "comma-separated images that exit 0 at once")
	unpullable := fs.String("unpullable", "", "comma-separated images that fail to pull even if listed above")
	verbose := fs.Bool("v", false, "debug logs")
	secretsNS := fs.String("secrets-namespace", "", "the only namespace whose Secrets and ConfigMaps pod env is resolved from (empty: all)")
	fs.StringVar(&pcfg.NodeIP, "node-ip", pcfg.NodeIP, "address reported as the nodes' InternalIP and the pods' hostIP")
	fs.DurationVar(&pcfg.Timings.Pull, "pull-delay", pcfg.Timings.Pull, "time to pull an image a container has not run yet (an image swap too)")
	fs.DurationVar(&pcfg.Timings.Start, "start-delay", pcfg.Timings.Start, "time to create and start a container")
	fs.DurationVar(&pcfg.Timings.RestartBackoff, "restart-backoff", pcfg.Timings.RestartBackoff, "first crash-loop backoff; doubles per restart")
	fs.DurationVar(&pcfg.Timings.MaxRestartBackoff, "max-restart-backoff", pcfg.Timings.MaxRestartBackoff, "crash-loop backoff cap")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pcfg.Pullable, pcfg.QuickExit, pcfg.Unpullable = list(*workload), list(*quickExit), list(*unpullable)
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var names []string
	profiles := map[string]provider.Profile{}
	for _, s := range list(*nodes) {
		name, p, err := provider.SplitNodeProfile(s)
		if err != nil {
			return err
		}
		names, profiles[name] = append(names, name), p
	}
	return virtualnode.Run(ctx, virtualnode.Config{Kubeconfig: *kubeconfig, Names: names, Profiles: profiles, MaxPods: *maxPods,
		Workers: *workers, Provider: pcfg, Logger: logger, SecretsNamespace: *secretsNS}, nil)
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
