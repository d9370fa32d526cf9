// Command kubectl-sidecar_terminator is the kubectl plugin
// `kubectl sidecar-terminator`: the controller's explain, and nothing else
// of the controller, for operators who do not build from source.
//
//	kubectl sidecar-terminator explain POD -n NAMESPACE [--context C] [--kubeconfig F]
//
// kubectl finds it on PATH by its name (kubectl-sidecar_terminator: the
// underscore is typed as a dash) and passes it the rest of the command
// line and its environment; the cluster is found as kubectl finds it
// (--kubeconfig, else $KUBECONFIG, else ~/.kube/config; --context; -n).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl sidecar-terminator:", err)
		os.Exit(1)
	}
}

// newCommand is the plugin's command tree: the controller command's own
// explain subcommand (the same flags and code), moved under a root that
// cannot start the controller.
func newCommand() *cobra.Command {
	ctl := app.NewCommand()
	root := &cobra.Command{
		Use:   "kubectl-sidecar_terminator",
		Short: "Explain what sidecar-terminator does, or will do, with a pod",
		Annotations: map[string]string{
			// Help and usage read "kubectl sidecar-terminator", as typed.
			cobra.CommandDisplayNameAnnotation: "kubectl sidecar-terminator",
		},
		Version:       ctl.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("kubectl sidecar-terminator {{.Version}}\n")
	// The verbosity flags (-v, --vmodule) the controller command carries.
	root.PersistentFlags().AddFlagSet(ctl.PersistentFlags())
	for _, c := range ctl.Commands() {
		if c.Name() == "explain" {
			ctl.RemoveCommand(c)
			root.AddCommand(c)
		}
	}
	return root
}
