// Package virtualnode runs mock virtual-kubelet nodes: each registers as a
// Ready node labelled type=virtual-kubelet and tainted
// virtual-kubelet.io/provider=mock:NoSchedule, and plays its pods with the
// simulator's container model (package provider). Several nodes can share
// one process and one API client. No kubelet HTTP server is started: nothing
// listens on any address, and pod logs/exec are not offered.
package virtualnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/virtualnode/provider"
)

// The node's identity as the controller and the Jobs see it.
const (
	LabelType      = "type"
	LabelValue     = "virtual-kubelet"
	TaintKey       = "virtual-kubelet.io/provider"
	TaintValue     = "mock"
	KubeletVersion = "v1.37.2-mock"
)

var (
	_ nodeutil.Provider = (*provider.Provider)(nil)
	_ node.PodNotifier  = (*provider.Provider)(nil)
)

// Config is the set of nodes one process runs.
type Config struct {
	// Kubeconfig of an identity allowed to act as a node (admin in tests).
	Kubeconfig string
	// Names of the nodes to register.
	Names []string
	// MaxPods is each node's pod capacity.
	MaxPods int
	// Workers is each node's number of pod sync workers.
	Workers int
	// Provider is the template of each node's provider config; NodeName is
	// set per node.
	Provider provider.Config
	Logger   *slog.Logger
	// SecretsNamespace, if set, is the only namespace whose Secrets and
	// ConfigMaps the nodes read (virtual-kubelet resolves pod env from
	// them). Empty reads every namespace, as virtual-kubelet does.
	SecretsNamespace string
}

// Run registers the nodes, runs them until ctx ends or one fails, and
// returns that failure. ready, if not nil, is called once all are Ready.
func Run(ctx context.Context, cfg Config, ready func()) error {
	if len(cfg.Names) == 0 {
		return errors.New("no node names")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.NumCPU() * 2
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	// The nodes share the client; each publishes one status per container
	// transition, so the default 5 QPS would delay them by seconds.
	rc.QPS, rc.Burst = 200, 400
	rc.UserAgent = "mock-virtual-node"
	var client kubernetes.Interface
	client, err = kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if cfg.SecretsNamespace != "" {
		client = secretsIn{Interface: client, ns: cfg.SecretsNamespace}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2*len(cfg.Names))
	var nodes []*nodeutil.Node
	for _, name := range cfg.Names {
		pcfg := cfg.Provider
		pcfg.NodeName, pcfg.Logger = name, cfg.Logger
		prov, err := provider.New(pcfg)
		if err != nil {
			return err
		}
		n, err := nodeutil.NewNode(name, func(nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
			return prov, nil, nil
		}, nodeutil.WithClient(client), withSpec(name, cfg))
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		nodes = append(nodes, n)
		nctx := withVKLogger(ctx, cfg.Logger.With("node", name))
		go prov.Run(nctx)
		go func() {
			if err := n.Run(nctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("node %s: %w", name, err)
			}
		}()
	}
	for i, n := range nodes {
		if err := n.WaitReady(ctx, 2*time.Minute); err != nil {
			return fmt.Errorf("node %s not ready: %w", cfg.Names[i], err)
		}
	}
	cfg.Logger.Info("nodes ready", "nodes", cfg.Names)
	if ready != nil {
		ready()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// withSpec sets what the node registers: labels, the taint that keeps other
// pods away, a capacity for thousands of pods, and no HTTP server.
func withSpec(name string, cfg Config) nodeutil.NodeOpt {
	return func(nc *nodeutil.NodeConfig) error {
		nc.NumWorkers = cfg.Workers
		// With no TLS config nodeutil starts no HTTP server at all; the
		// address is still parsed, so it names loopback.
		nc.HTTPListenAddr = "127.0.0.1:0"
		nc.TLSConfig = nil
		n := &nc.NodeSpec
		n.Labels[LabelType] = LabelValue
		n.Labels[corev1.LabelOSStable] = "linux"
		n.Labels[corev1.LabelArchStable] = runtime.GOARCH
		n.Spec.Taints = []corev1.Taint{{Key: TaintKey, Value: TaintValue, Effect: corev1.TaintEffectNoSchedule}}
		pods := strconv.Itoa(cfg.MaxPods)
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("1000"),
			corev1.ResourceMemory: resource.MustParse("4Ti"),
			corev1.ResourcePods:   resource.MustParse(pods),
		}
		n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
		n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: KubeletVersion, OperatingSystem: "linux", Architecture: runtime.GOARCH}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
		if ip := cfg.Provider.NodeIP; ip != "" {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		return nil
	}
}

// secretsIn narrows the Secrets and ConfigMaps the nodes read to one
// namespace. nodeutil.NewNode gives the pod controller informers of every
// Secret and ConfigMap in the cluster, with no option to scope them
// (virtual-kubelet v1.13.0, node/nodeutil/controller.go, NewNode's
// scmInformerFactory); they list and watch through this client, so here is
// where their namespace is chosen, and the mock node's RBAC needs no
// cluster-wide read of Secrets. Env from a Secret or ConfigMap of another
// namespace is then not resolved (the pod gets virtual-kubelet's error
// event); the workloads the suites run use none.
type secretsIn struct {
	kubernetes.Interface
	ns string
}

func (c secretsIn) CoreV1() corev1client.CoreV1Interface {
	return secretsInCore{CoreV1Interface: c.Interface.CoreV1(), ns: c.ns}
}

type secretsInCore struct {
	corev1client.CoreV1Interface
	ns string
}

func (c secretsInCore) Secrets(string) corev1client.SecretInterface {
	return c.CoreV1Interface.Secrets(c.ns)
}

func (c secretsInCore) ConfigMaps(string) corev1client.ConfigMapInterface {
	return c.CoreV1Interface.ConfigMaps(c.ns)
}
