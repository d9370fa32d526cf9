package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/hack/filelock"
)

// NodeOptions for StartNode.
type NodeOptions struct {
	// Name of the Node object; default "st-node".
	Name string
	// PodSubnet for the bridge CNI; default 10.88.0.0/24 (private).
	PodSubnet string
	// Images are tarballs imported into containerd before the kubelet
	// starts. One of them must provide PauseImage.
	Images []string
}

// Node is one real node: containerd + kubelet on this machine.
type Node struct {
	Name string
	// RunDir is <control plane run dir>/node.
	RunDir string
	// Socket is containerd's CRI socket.
	Socket string
	// KubeletRoot is the kubelet's --root-dir; container logs are under
	// <RunDir>/pod-logs.
	KubeletRoot string
	// KubeletVersion is what the Node reports (status.nodeInfo) once Ready.
	KubeletVersion string

	cp    *ControlPlane
	host  *HostState
	procs []*Process
	// unlock releases HostLock.
	unlock func()
}

// HostLock is held by every real node of this machine for its whole life:
// nodes share host-wide paths (cni0, /hostvarrun, the kubelet's
// device-plugin socket), so two test processes that each want one take
// turns instead of tearing down each other's network.
const HostLock = "/run/sidecar-terminator/real-node.lock"

// StartNode starts containerd and a kubelet registered with cp, and waits
// for the Node to be Ready. It records the host's state first so that Stop
// can undo what the kubelet and CNI change (see HostState).
func StartNode(ctx context.Context, cp *ControlPlane, opts NodeOptions) (_ *Node, err error) {
	if opts.Name == "" {
		opts.Name = "st-node"
	}
	if opts.PodSubnet == "" {
		opts.PodSubnet = "10.88.0.0/24"
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root (kubelet, containerd, cgroups, network namespaces)")
	}
	bins, err := KubernetesBinaries(ctx, Kubelet, KubeProxy)
	if err != nil {
		return nil, err
	}
	unlock, err := filelock.Acquire(ctx, HostLock)
	if err != nil {
		return nil, err
	}
	// The lock lives with the process that took it: a node started by
	// `cluster up` keeps running after that command exits, unlocked. Its
	// kube-proxy chain says it is there; say so before touching anything.
	if exec.Command("iptables", "-t", "nat", "-n", "-L", APIServerChain).Run() == nil {
		unlock()
		return nil, fmt.Errorf("another local cluster's node runs on this host (iptables chain %s exists), e.g. one `make cluster-up` started; stop it first: make cluster-down, or go run ./e2e/cmd/cluster down --run-dir DIR", APIServerChain)
	}
	n := &Node{Name: opts.Name, RunDir: filepath.Join(cp.RunDir, "node"), cp: cp, unlock: unlock}
	if n.host, err = RecordHostState(cp.RunDir); err != nil {
		unlock()
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	if err := n.startContainerd(ctx, opts.PodSubnet); err != nil {
		return nil, err
	}
	if err := n.ImportImages(ctx, opts.Images...); err != nil {
		return nil, err
	}
	if err := n.startKubelet(ctx, bins[Kubelet]); err != nil {
		return nil, err
	}
	// A reply from a pod to a pod on the same bridge must pass the nat
	// table to be translated back from a Service address.
	if err := writeSysctl("net/bridge/bridge-nf-call-iptables", "1"); err != nil {
		return nil, err
	}
	if err := n.startKubeProxy(ctx, bins[KubeProxy], opts.PodSubnet); err != nil {
		return nil, err
	}
	return n, nil
}

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Only 127.0.0.1: nothing is served on or dialled to another address.
address: 127.0.0.1
port: {{port}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{healthz}}
tlsCertFile: {{cert}}
tlsPrivateKeyFile: {{key}}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: {{ca}}}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://{{sock}}
# required on this host: cgroup v1, no systemd, swap unknown, no CAP_SYS_RESOURCE.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
oomScoreAdj: 0
clusterDomain: cluster.local
podLogsDir: {{run}}/pod-logs
volumePluginDir: {{run}}/volume-plugins
registerNode: true
serializeImagePulls: false
# A test VM's disk and memory must not taint the node mid-suite.
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 200
`

func (n *Node) startKubelet(ctx context.Context, bin string) error {
	nodeIP, err := nodeIP()
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	pki := n.cp.PKI
	cert, key, err := pki.issue("kubelet-serving", "system:node:"+n.Name, []string{"system:nodes"}, []string{"127.0.0.1", n.Name})
	if err != nil {
		return err
	}
	// The Node authorizer grants a node access to its own objects only
	// when the user is system:node:<name> in group system:nodes.
	kc, err := n.cp.componentKubeconfig("kubelet", "system:node:"+n.Name, []string{"system:nodes"})
	if err != nil {
		return err
	}
	n.KubeletRoot = filepath.Join(n.RunDir, "kubelet")
	cfg := filepath.Join(n.RunDir, "kubelet-config.yaml")
	vars := map[string]string{"port": itoa(ports[0]), "healthz": itoa(ports[1]), "cert": cert, "key": key,
		"ca": pki.CAFile(), "sock": n.Socket, "run": n.RunDir}
	if err := os.WriteFile(cfg, []byte(render(kubeletConfig, vars)), 0o644); err != nil {
		return fmt.Errorf("write kubelet config: %w", err)
	}
	p, err := startProcess(n.cp.RunDir, Kubelet, bin, []string{
		"--config=" + cfg,
		"--kubeconfig=" + kc,
		"--root-dir=" + n.KubeletRoot,
		"--cert-dir=" + filepath.Join(n.RunDir, "kubelet-pki"),
		"--hostname-override=" + n.Name,
		// Must not be loopback; only recorded in the Node's status, since
		// the kubelet's server binds 127.0.0.1.
		"--node-ip=" + nodeIP,
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	if err := installKubeletChain(nodeIP, ports[0]); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(n.cp.RestConfig)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	return waitFor(ctx, "node "+n.Name+" Ready", 120*time.Second, p, func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					n.KubeletVersion = node.Status.NodeInfo.KubeletVersion
					return true, nil
				}
				return false, fmt.Errorf("node not ready: %s", c.Message)
			}
		}
		return false, nil
	})
}

// nodeIP is the first non-loopback IPv4 address of an up interface. It is
// only written into the Node's status; nothing connects to it.
func nodeIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || i.Name == Bridge {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address for --node-ip")
}

// Processes returns the node's processes in start order.
func (n *Node) Processes() []*Process { return append([]*Process(nil), n.procs...) }

// Stop stops the kubelet, removes every pod sandbox through CRI (so CNI
// tears the pod networks down and the shims exit), stops containerd, and
// undoes the host changes. It returns what it could not undo.
func (n *Node) Stop() error {
	err := StopNodeDir(n.cp.RunDir)
	if n.unlock != nil {
		n.unlock()
		n.unlock = nil
	}
	return err
}
