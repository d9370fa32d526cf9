// Package app wires the controller into a process: flags, clients, informers,
// leader election, the metrics and health endpoints, signals, and the explain
// command. The binary's main only calls NewCommand.
package app

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Options are the controller's flags.
type Options struct {
	Kubeconfig             string
	QPS                    float32
	Burst                  int
	LeaderElect            bool
	LeaderElectNamespace   string
	LeaderElectName        string
	LeaseDuration          time.Duration
	RenewDeadline          time.Duration
	RetryPeriod            time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
	Workers                int
	VirtualNodeSelector    string
	QuickExitAllowlist     []string
	DefaultQuickExitImage  string
	CRRDeadline            time.Duration
	CRRMaxAttempts         int
	CRRRetryBackoff        time.Duration
	CRRTTLAfterFinished    time.Duration
	SwapStartAllowance     time.Duration
	KruiseDaemonGrace      time.Duration
	Profiling              bool
	NativeSidecars         NativeSidecarOptions
}

// ClientLimitOff, as --kube-api-qps, turns the client-side rate limiter off:
// client-go builds no token bucket when rest.Config.QPS is negative and no
// RateLimiter is set (k8s.io/client-go@v0.35.4 rest/config.go,
// RESTClientForConfigAndClient: "if qps > 0 { rateLimiter = ... }"; zero
// would mean its DefaultQPS of 5, hence refused below).
const ClientLimitOff = -1

// DefaultWorkers is chosen so that a burst does not queue behind the API
// server's latency: workers = writes per second the API server takes during
// a burst × the time each write takes there (Little's law). On the 2-core
// bench (`make bench`: 5,000 pods over 50,000 others) the API server took
// 250–600 writes a second at 30–120 ms each (53 ms mean), so about 30 writes
// are in flight; with 8 workers pods waited 2–4 s in the queue. At 20,000
// pods over 150,000 (`make bench-scale`) the mains ended 115–140 a second
// and each write took 209–267 ms at the client, 29–37 in flight: 32 workers
// were all busy and pods waited 0.13–2.0 s in the queue (mean per burst);
// with 64 the mean wait was under a millisecond. A larger machine takes more
// writes but answers each faster, so the product stays of that order. An
// idle worker is a parked goroutine, so erring high costs nothing.
const DefaultWorkers = 64

// DefaultOptions are the production defaults.
func DefaultOptions() *Options {
	p := decision.DefaultPolicy()
	return &Options{
		// No client-side limiter: the API server's Priority and Fairness
		// protects it and answers 429 with Retry-After when the controller
		// must back off (client-go waits and retries those; the reconciler
		// then requeues the pod after the server's delay, see
		// reconciler.Requeue). A token bucket here only made a burst of
		// finished pods queue at 50 writes a second on a server with room.
		QPS: ClientLimitOff, Burst: ClientLimitOff,
		LeaderElect: true, LeaderElectName: "sidecar-terminator",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		// Metrics (and pprof with --profiling) only on loopback unless told:
		// they are unauthenticated. The chart binds them to the pod's
		// address for its Service, behind a NetworkPolicy.
		MetricsBindAddress: "127.0.0.1:8080", HealthProbeBindAddress: ":8081",
		Workers:             DefaultWorkers,
		QuickExitAllowlist:  p.AllowedQuickExitImages,
		VirtualNodeSelector: "type=virtual-kubelet",
		CRRDeadline:         p.CRRDeadline, CRRMaxAttempts: p.MaxCRRAttempts, CRRRetryBackoff: p.RetryBackoff,
		CRRTTLAfterFinished: reconciler.DefaultConfig().CRRTTLAfterFinished,
		SwapStartAllowance:  p.SwapStartAllowance,
		KruiseDaemonGrace:   reconciler.DefaultKruiseDaemonGrace,
		NativeSidecars:      defaultNativeSidecarOptions(),
	}
}

// AddFlags binds the options to flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; empty means in-cluster configuration.")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Client-side limit of queries per second to the API server; -1 turns the client's limiter off and leaves flow control to the API server (Priority and Fairness).")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of queries to the API server above --kube-api-qps; unused while the limiter is off.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader through a Lease so that only one replica acts.")
	fs.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", o.LeaderElectNamespace, "Namespace of the leader election Lease. (default $POD_NAMESPACE, else \""+defaultLeaseNamespace+"\")")
	fs.StringVar(&o.LeaderElectName, "leader-elect-name", o.LeaderElectName, "Name of the leader election Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "Lease duration.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "Lease renew deadline.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "Lease retry period.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus /metrics endpoint, and of pprof when profiling is on; unauthenticated, so on loopback unless set; 0 disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz; 0 disables them.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's pprof profiles under /debug/pprof/ on the metrics address, for go tool pprof.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Pods synced in parallel.")
	fs.StringVar(&o.VirtualNodeSelector, "virtual-node-selector", o.VirtualNodeSelector, "Label selector of virtual-kubelet nodes, where sidecars are stopped by image swap.")
	fs.StringSliceVar(&o.QuickExitAllowlist, "quick-exit-image-allowlist", o.QuickExitAllowlist, "Images that may be swapped in: a full reference allows exactly it, a repository any tag or digest of it, '*' any valid image (an explicit choice: pod authors then pick the image). Empty allows none.")
	fs.StringVar(&o.DefaultQuickExitImage, "default-quick-exit-image", o.DefaultQuickExitImage, "Quick-exit image swapped in for marked sidecars that name none of their own, only where no ContainerRecreateRequest path exists (no OpenKruise, a node without kruise-daemon, a CRR refused or failed); must be on --quick-exit-image-allowlist. Empty: none.")
	fs.DurationVar(&o.CRRDeadline, "crr-deadline", o.CRRDeadline, "How long a ContainerRecreateRequest may take before its kill counts as failed.")
	fs.IntVar(&o.CRRMaxAttempts, "crr-max-attempts", o.CRRMaxAttempts, "ContainerRecreateRequests made for one pod before giving up.")
	fs.DurationVar(&o.CRRRetryBackoff, "crr-retry-backoff", o.CRRRetryBackoff, "Wait before the second ContainerRecreateRequest; doubles each time.")
	fs.DurationVar(&o.SwapStartAllowance, "swap-start-allowance", o.SwapStartAllowance, "Added to a pod's termination grace period: how long a sidecar swapped to its quick-exit image may take to terminate (pull and start included) before a Warning says why it has not.")
	fs.DurationVar(&o.CRRTTLAfterFinished, "crr-ttl-after-finished", o.CRRTTLAfterFinished, "ttlSecondsAfterFinished written on each ContainerRecreateRequest.")
	o.NativeSidecars.AddFlags(fs)
	fs.DurationVar(&o.KruiseDaemonGrace, "kruise-daemon-grace", o.KruiseDaemonGrace, "How long a node's OpenKruise NodeImage may exist with no status written by kruise-daemon before the node is taken to run none: its pods then get the image swap (or a NoTerminationPath Warning), never a ContainerRecreateRequest.")
}

// defaultLeaseNamespace is the Lease's namespace when neither
// --leader-elect-namespace nor $POD_NAMESPACE says.
const defaultLeaseNamespace = "sidecar-terminator-system"

// leaseNamespace resolves --leader-elect-namespace: the flag, else the
// pod's namespace (the chart and the manifests set $POD_NAMESPACE from the
// downward API), else defaultLeaseNamespace. Resolved at run time rather
// than as the flag's default, so --help shows one default, not this
// machine's environment.
func (o *Options) leaseNamespace() string {
	if o.LeaderElectNamespace != "" {
		return o.LeaderElectNamespace
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return defaultLeaseNamespace
}

// ReconcilerConfig checks the options and turns them into the reconciler's configuration.
func (o *Options) ReconcilerConfig() (reconciler.Config, error) {
	cfg := reconciler.DefaultConfig()
	sel, err := labels.Parse(o.VirtualNodeSelector)
	if err != nil {
		return cfg, fmt.Errorf("--virtual-node-selector %q: %w", o.VirtualNodeSelector, err)
	}
	for _, img := range o.QuickExitAllowlist {
		if img == decision.AllowAnyImage {
			continue
		}
		if err := decision.ValidateImage(img); err != nil {
			return cfg, fmt.Errorf("--quick-exit-image-allowlist entry %q: %w", img, err)
		}
	}
	if err := o.checkDefaultImage(); err != nil {
		return cfg, err
	}
	if o.CRRDeadline < decision.MinCRRDeadline {
		return cfg, fmt.Errorf("--crr-deadline (%s) must be at least %s: OpenKruise's webhook refuses a shorter activeDeadlineSeconds", o.CRRDeadline, decision.MinCRRDeadline)
	}
	if o.CRRMaxAttempts < 1 || o.Workers < 1 {
		return cfg, fmt.Errorf("--crr-max-attempts and --workers must be at least 1")
	}
	if o.CRRTTLAfterFinished < time.Duration(o.CRRMaxAttempts)*o.CRRDeadline {
		return cfg, fmt.Errorf("--crr-ttl-after-finished (%s) must outlast the attempts (%d × %s): retries count earlier CRRs", o.CRRTTLAfterFinished, o.CRRMaxAttempts, o.CRRDeadline)
	}
	if o.KruiseDaemonGrace <= 0 {
		return cfg, fmt.Errorf("--kruise-daemon-grace (%s) must be positive: a node whose daemon has not yet written its NodeImage would be taken for one without", o.KruiseDaemonGrace)
	}
	if err := o.checkClientLimit(); err != nil {
		return cfg, err
	}
	cfg.VirtualNodeSelector = sel
	cfg.Policy.AllowedQuickExitImages, cfg.Policy.CRRDeadline = o.QuickExitAllowlist, o.CRRDeadline
	cfg.Policy.MaxCRRAttempts, cfg.Policy.RetryBackoff = o.CRRMaxAttempts, o.CRRRetryBackoff
	cfg.Policy.SwapStartAllowance = o.SwapStartAllowance
	cfg.Policy.DefaultQuickExitImage = o.DefaultQuickExitImage
	cfg.CRRTTLAfterFinished = o.CRRTTLAfterFinished
	cfg.KruiseDaemonGrace = o.KruiseDaemonGrace
	return cfg, nil
}

// checkDefaultImage refuses a default quick-exit image the decision would
// not swap in: an invalid reference, or one the allowlist does not allow.
// The decision checks it again and fails closed; refusing here makes the
// mistake an error at start rather than pods left without a path.
func (o *Options) checkDefaultImage() error {
	img := o.DefaultQuickExitImage
	if img == "" {
		return nil
	}
	if err := decision.ValidateImage(img); err != nil {
		return fmt.Errorf("--default-quick-exit-image %q: %w", img, err)
	}
	if !decision.ImageAllowed(img, o.QuickExitAllowlist) {
		return fmt.Errorf("--default-quick-exit-image %q is not allowed by --quick-exit-image-allowlist %q", img, o.QuickExitAllowlist)
	}
	return nil
}

// checkClientLimit refuses a client limit client-go would read otherwise
// than meant: QPS 0 is its default of 5 per second, and a positive QPS with
// no burst fails when the clients are built.
func (o *Options) checkClientLimit() error {
	switch {
	case o.QPS == 0:
		return fmt.Errorf("--kube-api-qps 0 would mean client-go's default of 5; use -1 to turn the client's limiter off")
	case o.QPS > 0 && o.Burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1 with --kube-api-qps %g", o.QPS)
	}
	return nil
}
