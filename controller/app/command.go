package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// NewCommand is the sidecar-terminator command: it runs the controller, and
// `explain` tells what it would do with one pod.
func NewCommand() *cobra.Command {
	o := DefaultOptions()
	cmd := &cobra.Command{
		Use:           "sidecar-terminator",
		Short:         "Stops the sidecars of Job pods once their main containers are done",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return Run(klog.NewContext(ctx, klog.Background()), o)
		},
	}
	// --version prints the version line and exits.
	cmd.Version = Build().String()
	cmd.SetVersionTemplate("sidecar-terminator {{.Version}}\n")
	o.AddFlags(cmd.Flags())
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	// Only the verbosity flags: the rest of klog's would only confuse.
	cmd.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))
	cmd.PersistentFlags().AddGoFlag(klogFlags.Lookup("vmodule"))
	cmd.AddCommand(newExplainCommand())
	return cmd
}

func newExplainCommand() *cobra.Command {
	o := DefaultOptions()
	var namespace string
	cmd := &cobra.Command{
		Use:   "explain POD",
		Short: "Print how each container of a pod is classified, and what the controller will do and why",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return Explain(cmd.Context(), cmd.OutOrStdout(), o, namespace, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&namespace, "namespace", "n", "default", "Namespace of the pod.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty means in-cluster configuration.")
	fs.StringVar(&o.VirtualNodeSelector, "virtual-node-selector", o.VirtualNodeSelector, "As for the controller.")
	fs.StringSliceVar(&o.QuickExitAllowlist, "quick-exit-image-allowlist", nil, "As for the controller.")
	fs.DurationVar(&o.CRRDeadline, "crr-deadline", o.CRRDeadline, "As for the controller.")
	return cmd
}

// Explain reads one pod live from the API server, decides as the controller
// would, and writes the explanation to w. It writes nothing to the cluster.
func Explain(ctx context.Context, w io.Writer, o *Options, namespace, name string) error {
	cfg, clients, crrAPI, err := connect(o)
	if err != nil {
		return err
	}
	read := kube.LiveReader{Client: clients.Kube, Kruise: clients.Kruise, CRRAPI: crrAPI}
	pod, err := read.Pod(namespace, name)
	if err != nil {
		return fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	rec := reconciler.New(cfg, read, nil, nil, nil, clock.RealClock{})
	plan, err := rec.Plan(pod, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Pod %s/%s on node %q (restartPolicy %s, phase %s); ContainerRecreateRequest API served: %t\n\n",
		namespace, name, pod.Spec.NodeName, pod.Spec.RestartPolicy, pod.Status.Phase, crrAPI)
	return plan.Explain(w)
}
