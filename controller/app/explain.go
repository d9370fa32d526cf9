package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// ControllerSelector selects the controller's Deployment, as the chart and
// the kustomize base label it.
const ControllerSelector = "app.kubernetes.io/name=sidecar-terminator"

// explainFlags are explain's own flags. The controller settings among them
// (opts) override the running controller's only where given.
type explainFlags struct {
	kubeconfig, context, namespace, controllerNamespace string
	opts                                                *Options
}

// settingFlags are the controller's flags that change a decision; explain
// takes them from the running controller unless given on its command line.
var settingFlags = []string{"virtual-node-selector", "quick-exit-image-allowlist", "default-quick-exit-image", "crr-deadline",
	"crr-max-attempts", "crr-retry-backoff", "crr-ttl-after-finished", "kruise-daemon-grace"}

func newExplainCommand() *cobra.Command {
	f := &explainFlags{opts: DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "explain POD",
		Short: "Print how each container of a pod is classified, and what the controller will do (or last did) and why",
		Long: `Explain reads one pod and decides about it as the running controller would.

It finds the cluster as kubectl does: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the in-cluster configuration; --context picks a context,
and the namespace defaults to the context's. It takes the controller's settings
(virtual-node selector, quick-exit allowlist, CRR deadline and attempts) from
the running controller: its own process when run inside the controller's
container, else the args of the Deployment labelled ` + ControllerSelector + `.
Flags given here override them. For a finished pod it shows the
controller's last events on the pod.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd.Context(), cmd.OutOrStdout(), cmd.Flags(), f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.namespace, "namespace", "n", "", "Namespace of the pod. (default: the kubeconfig context's namespace, else \"default\")")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	fs.StringVar(&f.context, "context", "", "The kubeconfig context to use. (default: the current context)")
	fs.StringVar(&f.controllerNamespace, "controller-namespace", "", "Namespace of the controller's Deployment. (default: any namespace)")
	o := f.opts
	fs.StringVar(&o.VirtualNodeSelector, "virtual-node-selector", o.VirtualNodeSelector, "Override the running controller's setting.")
	fs.StringSliceVar(&o.QuickExitAllowlist, "quick-exit-image-allowlist", nil, "Override the running controller's setting.")
	fs.StringVar(&o.DefaultQuickExitImage, "default-quick-exit-image", o.DefaultQuickExitImage, "Override the running controller's setting.")
	fs.DurationVar(&o.CRRDeadline, "crr-deadline", o.CRRDeadline, "Override the running controller's setting.")
	fs.IntVar(&o.CRRMaxAttempts, "crr-max-attempts", o.CRRMaxAttempts, "Override the running controller's setting.")
	fs.DurationVar(&o.CRRRetryBackoff, "crr-retry-backoff", o.CRRRetryBackoff, "Override the running controller's setting.")
	fs.DurationVar(&o.CRRTTLAfterFinished, "crr-ttl-after-finished", o.CRRTTLAfterFinished, "Override the running controller's setting.")
	fs.DurationVar(&o.KruiseDaemonGrace, "kruise-daemon-grace", o.KruiseDaemonGrace, "Override the running controller's setting.")
	return cmd
}

// kubectlConfig loads the client configuration by kubectl's rules.
func kubectlConfig(kubeconfig, context string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
}

func runExplain(ctx context.Context, w io.Writer, fs *pflag.FlagSet, f *explainFlags, pod string) error {
	cc := kubectlConfig(f.kubeconfig, f.context)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("load client configuration: %w", err)
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("namespace from the kubeconfig: %w", err)
		}
	}
	clients, err := NewClientsForConfig(cfg, 50, 100)
	if err != nil {
		return err
	}
	crrAPI, err := kube.CRRAPIServed(clients.Kube.Discovery())
	if err != nil {
		return err
	}
	settings, source := controllerSettings(ctx, clients.Kube, f.controllerNamespace, "/proc/1/cmdline")
	var overridden []string
	for _, name := range settingFlags {
		if fs.Changed(name) {
			overridden = append(overridden, "--"+name)
		}
	}
	applyOverrides(settings, f.opts, fs)
	if len(overridden) > 0 {
		source += "; overridden here: " + strings.Join(overridden, " ")
	}
	rcfg, err := settings.ReconcilerConfig()
	if err != nil {
		return fmt.Errorf("controller settings (%s): %w", source, err)
	}
	read := kube.LiveReader{Client: clients.Kube, Kruise: clients.Kruise, CRRAPI: crrAPI, Meta: clients.Meta}
	return explainPod(ctx, w, clients.Kube, read, rcfg, source, ns, pod)
}

// Explain reads one pod live from the API server, decides as a controller
// with options o would, and writes the explanation to w. It writes nothing
// to the cluster. (The explain command also finds the running controller's
// settings; this takes them as given.)
func Explain(ctx context.Context, w io.Writer, o *Options, namespace, name string) error {
	cfg, clients, crrAPI, err := connect(o)
	if err != nil {
		return err
	}
	read := kube.LiveReader{Client: clients.Kube, Kruise: clients.Kruise, CRRAPI: crrAPI, Meta: clients.Meta}
	return explainPod(ctx, w, clients.Kube, read, cfg, "as given", namespace, name)
}

func explainPod(ctx context.Context, w io.Writer, client kubernetes.Interface, read kube.LiveReader, cfg reconciler.Config, source, namespace, name string) error {
	pod, err := read.Pod(namespace, name)
	if err != nil {
		return fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	rec := reconciler.New(cfg, read, nil, explainLive{Writer: kube.Writer{Client: read.Client, Kruise: read.Kruise}, read: read}, nil, nil, clock.RealClock{})
	plan, err := rec.ExplainPlan(pod, time.Now())
	if err != nil {
		return err
	}
	if plan.Verdict == decision.VerdictIgnored && len(plan.Containers) == 0 {
		// The controller does not look at the pod (e.g. it has finished); the
		// table still shows how its containers are marked.
		plan.Containers, _ = decision.Classify(pod, cfg.Policy)
	}
	fmt.Fprintf(w, "Pod %s/%s on node %q (restartPolicy %s, phase %s); ContainerRecreateRequest API served: %t\n",
		namespace, name, pod.Spec.NodeName, pod.Spec.RestartPolicy, pod.Status.Phase, read.CRRAPI)
	defaultImage := cfg.Policy.DefaultQuickExitImage
	if defaultImage == "" {
		defaultImage = "none"
	}
	fmt.Fprintf(w, "Settings: %s (virtual nodes: %q, quick-exit allowlist: %v, default quick-exit image: %s, CRR deadline %s, %d attempts)\n\n",
		source, cfg.VirtualNodeSelector.String(), cfg.Policy.AllowedQuickExitImages, defaultImage, cfg.Policy.CRRDeadline, cfg.Policy.MaxCRRAttempts)
	if err := plan.Explain(w); err != nil {
		return err
	}
	writeNativeSidecars(ctx, w, client, cfg.VirtualNodeSelector, pod)
	return writeEvents(ctx, w, client, pod)
}

// explainLive is explain's live reads (reconciler.LiveReader): the Job
// through its live reader, with that reader's timeout; the pod, the CRRs
// and OpenKruise's own terminator's CRR as the controller reads them
// (kube.Writer), which explain's plan never asks for but the reconciler
// requires.
type explainLive struct {
	kube.Writer
	read kube.LiveReader
}

func (e explainLive) LiveJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return e.read.LiveJob(ctx, namespace, name)
}

// writeEvents lists the controller's events on the pod, oldest first: for a
// finished pod they are its last decisions.
func writeEvents(ctx context.Context, w io.Writer, client kubernetes.Interface, pod *corev1.Pod) error {
	list, err := client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String()})
	if err != nil {
		fmt.Fprintf(w, "Events:   cannot list (%v)\n", err)
		return nil
	}
	var ours []corev1.Event
	for _, e := range list.Items {
		if e.Source.Component == eventSource || e.ReportingController == eventSource {
			ours = append(ours, e)
		}
	}
	if len(ours) == 0 {
		_, err := fmt.Fprintln(w, "Events:   none from sidecar-terminator on this pod (events expire after the API server's --event-ttl, 1h by default)")
		return err
	}
	sort.SliceStable(ours, func(i, j int) bool { return eventTime(ours[i]).Before(eventTime(ours[j])) })
	fmt.Fprintln(w, "Events from sidecar-terminator, oldest first:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LAST SEEN\tTYPE\tREASON\tCOUNT\tMESSAGE")
	for _, e := range ours {
		count := e.Count
		if count == 0 {
			count = 1
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", eventTime(e).UTC().Format(time.RFC3339), e.Type, e.Reason, count, e.Message)
	}
	return tw.Flush()
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// controllerSettings returns the running controller's options and where they
// came from: the process at cmdlinePath when explain runs in the
// controller's container (`kubectl exec deploy/... -- explain`), else the
// args of the controller's Deployment, else the defaults.
func controllerSettings(ctx context.Context, client kubernetes.Interface, namespace, cmdlinePath string) (*Options, string) {
	if args, ok := controllerProcessArgs(cmdlinePath); ok {
		if o, err := parseControllerArgs(args); err == nil {
			return o, "from the controller process in this container"
		}
	}
	deps, err := client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{LabelSelector: ControllerSelector})
	if err != nil {
		return DefaultOptions(), fmt.Sprintf("defaults (cannot list the controller's Deployment: %v)", err)
	}
	sort.Slice(deps.Items, func(i, j int) bool {
		return deps.Items[i].Namespace+"/"+deps.Items[i].Name < deps.Items[j].Namespace+"/"+deps.Items[j].Name
	})
	for _, d := range deps.Items {
		cs := d.Spec.Template.Spec.Containers
		for _, c := range cs {
			if c.Name != "controller" && len(cs) > 1 {
				continue
			}
			o, err := parseControllerArgs(append(append([]string(nil), c.Command...), c.Args...))
			if err != nil {
				return DefaultOptions(), fmt.Sprintf("defaults (Deployment %s/%s: %v)", d.Namespace, d.Name, err)
			}
			src := fmt.Sprintf("from Deployment %s/%s", d.Namespace, d.Name)
			if len(deps.Items) > 1 {
				src += fmt.Sprintf(" (one of %d; --controller-namespace picks another)", len(deps.Items))
			}
			return o, src
		}
	}
	return DefaultOptions(), "defaults (no Deployment labelled " + ControllerSelector + " found)"
}

// controllerProcessArgs reads the args of the controller process (not an
// explain) from a /proc/PID/cmdline file.
func controllerProcessArgs(path string) ([]string, bool) {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return nil, false
	}
	argv := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	if filepath.Base(argv[0]) != "sidecar-terminator" {
		return nil, false
	}
	for _, a := range argv[1:] {
		if a == "explain" {
			return nil, false
		}
	}
	return argv[1:], true
}

// parseControllerArgs reads a controller command line (program name, if
// any, first) into Options, ignoring flags that do not change a decision.
func parseControllerArgs(args []string) (*Options, error) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	fs.ParseErrorsWhitelist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = args[1:] // the program
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("parse controller args %q: %w", args, err)
	}
	return o, nil
}

// applyOverrides copies into settings each controller setting given on
// explain's command line.
func applyOverrides(settings, given *Options, fs *pflag.FlagSet) {
	for _, name := range settingFlags {
		if !fs.Changed(name) {
			continue
		}
		switch name {
		case "virtual-node-selector":
			settings.VirtualNodeSelector = given.VirtualNodeSelector
		case "quick-exit-image-allowlist":
			settings.QuickExitAllowlist = given.QuickExitAllowlist
		case "default-quick-exit-image":
			settings.DefaultQuickExitImage = given.DefaultQuickExitImage
		case "crr-deadline":
			settings.CRRDeadline = given.CRRDeadline
		case "crr-max-attempts":
			settings.CRRMaxAttempts = given.CRRMaxAttempts
		case "crr-retry-backoff":
			settings.CRRRetryBackoff = given.CRRRetryBackoff
		case "crr-ttl-after-finished":
			settings.CRRTTLAfterFinished = given.CRRTTLAfterFinished
		case "kruise-daemon-grace":
			settings.KruiseDaemonGrace = given.KruiseDaemonGrace
		}
	}
}
