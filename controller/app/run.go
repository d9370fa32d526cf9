package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"time"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Clients are the API clients the controller uses.
type Clients struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	Meta   metadata.Interface
	Kruise kruiseclient.Interface
}

// NewClients builds the clients from a kubeconfig path, or in-cluster when empty.
func NewClients(kubeconfig string, qps float32, burst int) (*Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load client configuration: %w", err)
	}
	return NewClientsForConfig(cfg, qps, burst)
}

// NewClientsForConfig builds the clients from a client configuration.
func NewClientsForConfig(cfg *rest.Config, qps float32, burst int) (*Clients, error) {
	var err error
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "sidecar-terminator"
	// No gzip: the API server compresses every watch event it flushes to a
	// client that accepts gzip (and every answer over 128 KiB), and the
	// client decompresses each. In e2e/bench's profile of a 2,000-pod burst
	// the decompression alone was 8% of the controller's CPU, the API
	// server paying the compression besides, to save bandwidth on the link
	// between a controller and its API server, which is the cluster's own.
	cfg.DisableCompression = true
	c := &Clients{Config: cfg}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The pod informer's watch decodes each event in one pass, keeping
	// what the cache keeps (kube's podwatch.go); everything else is
	// client-go's.
	if c.Kube, err = kube.WithPodWatchDecoder(kubeClient, cfg); err != nil {
		return nil, err
	}
	if c.Meta, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	kruise, err := kruiseclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The CRR informer's watch decodes each event in one pass (kube's
	// crrwatch.go); everything else is client-go's.
	if c.Kruise, err = kube.WithCRRWatchDecoder(kruise, cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// eventsRESTConfig is the events client's configuration: cfg, in protobuf.
// client-go's event sink calls the events client's legacy
// CreateWithEventNamespace, which speaks the client's content type (JSON
// unless set, unlike the generated methods, which prefer protobuf for the
// built-in types); encoding each event and decoding the answer in JSON was
// a tenth of the controller's CPU in a burst (e2e/bench's profile).
func eventsRESTConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// connect checks the options, builds the clients and asks whether the CRR
// API is served: what both the controller and explain start with.
func connect(o *Options) (reconciler.Config, *Clients, bool, error) {
	cfg, err := o.ReconcilerConfig()
	if err != nil {
		return cfg, nil, false, err
	}
	clients, err := NewClients(o.Kubeconfig, o.QPS, o.Burst)
	if err != nil {
		return cfg, nil, false, err
	}
	crrAPI, err := kube.CRRAPIServed(clients.Kube.Discovery())
	return cfg, clients, crrAPI, err
}

// crrAPIDiscoveryPeriod is how often discovery is asked whether the CRR API
// is served (besides at once after a CRR create answered 404): OpenKruise
// installed or removed while the controller runs is noticed within it.
const crrAPIDiscoveryPeriod = 5 * time.Minute

// Run runs the controller until ctx ends.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	build := Build()
	logger.Info("Starting sidecar-terminator", "version", build.Version, "revision", build.Revision, "goVersion", build.GoVersion)
	setMemoryLimit(logger)
	setMaxProcs(logger)
	registry := prometheus.NewRegistry()
	registry.MustRegister(runtimeCollectors()...)
	process := newProcessMetrics(registry, build)
	registerLibraryMetrics(registry) // before the first request and the queue
	cfg, clients, crrAPI, err := connect(o)
	if err != nil {
		return err
	}
	if crrAPI {
		logger.Info("ContainerRecreateRequest API found: sidecars on normal nodes are stopped through kruise-daemon")
	} else {
		logger.Info("ContainerRecreateRequest API not served (OpenKruise not installed): only image swaps are possible until it is", "discoveryPeriod", crrAPIDiscoveryPeriod.String())
	}

	metrics := reconciler.NewMetrics(registry)

	// Events go through a client of their own, so that a burst of events never
	// waits behind the writes that stop sidecars in the client's QPS limiter;
	// at the API server they give way to them (events.deferWhile).
	eventsClient, err := kubernetes.NewForConfig(eventsRESTConfig(clients.Config))
	if err != nil {
		return err
	}
	// Not tied to ctx: on shutdown the queued events are still written.
	recorder := newEvents(kube.EventSink{Client: eventsClient.CoreV1().RESTClient()}, scheme.Scheme,
		corev1.EventSource{Component: eventSource}, eventShards)
	defer recorder.shutdown(5 * time.Second)

	caches, err := kube.NewCaches(clients.Kube, clients.Meta, clients.Kruise, crrAPI)
	if err != nil {
		return err
	}
	// Which nodes a kruise-daemon serves, from OpenKruise's NodeImages
	// (kube/daemons.go); without that API every normal node keeps the CRR path.
	switch served, err := kube.NodeImagesServed(clients.Kube.Discovery()); {
	case err != nil:
		logger.Info("Discovery of OpenKruise's NodeImage API failed: every normal node is taken to run kruise-daemon", "err", err.Error())
	case served:
		if err := caches.WatchNodeImages(); err != nil {
			return err
		}
	}
	rec, writer := newReconciler(cfg, caches, kube.Writer{Client: clients.Kube, Kruise: clients.Kruise}, recorder, metrics)
	ctrl, err := kube.NewController(caches, rec)
	if err != nil {
		return err
	}
	if err := ctrl.RegisterMetrics(registry); err != nil {
		return err
	}
	// A burst is on while more pods are queued than workers can take, or the
	// controller writes burstWrites times a second or more (with enough
	// workers the queue stays short in a burst). Otherwise events go at once.
	recorder.deferWhile(func() bool { return ctrl.Queued() > o.Workers || writer.bursting() })

	errs := make(chan error, 2)
	metricsPaths := "/metrics"
	if o.Profiling {
		metricsPaths += " /debug/pprof/"
	}
	serve(ctx, "metrics", metricsPaths, o.MetricsBindAddress, metricsMux(registry, o.Profiling), errs)
	// Ready once the caches have synced, leader or not: a standby replica is
	// healthy and ready to take over, and a Deployment of two must count both.
	serve(ctx, "health probes", "/healthz /readyz", o.HealthProbeBindAddress, healthMux(caches.HasSynced), errs)
	if err := startNativeSidecars(ctx, o, clients.Kube, registry, errs); err != nil {
		return err
	}

	// Caches fill on every replica, so a new leader acts at once.
	caches.Start(ctx.Done())
	go caches.DiscoverCRRAPI(ctx, clients.Kube.Discovery(), crrAPIDiscoveryPeriod)
	workersDone := make(chan struct{})
	var workersStarted atomic.Bool
	run := func(ctx context.Context) {
		workersStarted.Store(true)
		defer close(workersDone)
		process.leader.Set(1)
		defer process.leader.Set(0)
		if cache.WaitForCacheSync(ctx.Done(), caches.Synced()...) {
			noteEarlierActions(ctx, caches, cfg.Policy, eventsClient, recorder)
			checkKruiseTerminator(ctx, eventsClient, rec)
		}
		if err := ctrl.Run(ctx, o.Workers); err != nil {
			errs <- err
		}
	}
	if !o.LeaderElect {
		go run(ctx)
	} else {
		if err := leaderElect(ctx, o, clients.Kube, run, errs); err != nil {
			return err
		}
	}
	select {
	case <-ctx.Done():
		logger.Info("Shutting down")
		if workersStarted.Load() {
			select {
			case <-workersDone:
			case <-time.After(10 * time.Second):
			}
		}
		return nil
	case err := <-errs:
		return err
	}
}

func leaderElect(ctx context.Context, o *Options, client kubernetes.Interface, run func(context.Context), errs chan<- error) error {
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	id = fmt.Sprintf("%s_%d", id, os.Getpid())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaseNamespace(), o.LeaderElectName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	go leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		ReleaseOnCancel: true, Name: o.LeaderElectName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: run,
			OnStoppedLeading: func() {
				// Another replica may act now; carrying on would risk two writers.
				if ctx.Err() == nil {
					errs <- errors.New("lost leadership")
				}
			},
			OnNewLeader: func(identity string) {
				klog.FromContext(ctx).Info("Leader", "identity", identity, "self", identity == id)
			},
		},
	})
	return nil
}

// metricsMux serves /metrics and, when profiling is on, the pprof handlers
// (off by default: profiles expose internals and cost CPU while taken).
func metricsMux(registry *prometheus.Registry, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func healthMux(ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serve runs an HTTP server on addr until ctx ends; "0" or "" disables it.
// what and paths name it in the log line.
func serve(ctx context.Context, what, paths, addr string, h http.Handler, errs chan<- error) {
	if addr == "0" || addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		errs <- fmt.Errorf("listen on %s: %w", addr, err)
		return
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serve %s: %w", addr, err)
		}
	}()
	klog.FromContext(ctx).Info("Serving "+what, "address", ln.Addr().String(), "paths", paths)
}

// newReconciler is the controller's reconciler: it writes through the write
// counter the events give way to (lastWrite), and reads live straight from
// the API server through api.
func newReconciler(cfg reconciler.Config, caches reconciler.Reader, api kube.Writer, events reconciler.Recorder, metrics *reconciler.Metrics) (*reconciler.Reconciler, *lastWrite) {
	writer := &lastWrite{Writer: api}
	return reconciler.New(cfg, caches, writer, api, events, metrics, clock.RealClock{}), writer
}
