package app

import (
	"flag"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
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
