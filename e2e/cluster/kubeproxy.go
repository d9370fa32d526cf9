package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KubernetesServiceIP is the first address of the apiserver's
// --service-cluster-ip-range: the ClusterIP of the default/kubernetes
// Service, which the kubelet hands to every pod as KUBERNETES_SERVICE_HOST.
const KubernetesServiceIP = "10.0.0.1"

// APIServerChain is the harness's own nat chain. The apiserver listens on
// 127.0.0.1 only (nothing of the harness is served on another address), and
// the kubernetes Service's Endpoints cannot name a loopback address
// (Kubernetes validation, pkg/apis/core/validation ValidateEndpointIP, refuses
// 127.0.0.0/8): what kube-proxy programs for 10.0.0.1:443 is the advertised
// node address, where nothing listens. This chain, jumped to from PREROUTING
// ahead of kube-proxy's KUBE-SERVICES, translates pod traffic for
// 10.0.0.1:443 to the apiserver on 127.0.0.1 instead; route_localnet (which
// kube-proxy sets for its localhost NodePorts anyway) lets the kernel route a
// packet from the pod bridge to a loopback address. Every other Service is
// kube-proxy's alone. The chain is removed at `cluster down` (see ours).
const APIServerChain = "ST-APISERVER"

// kubeProxyConfig runs kube-proxy in iptables mode with its health and
// metrics servers on 127.0.0.1, and leaves the host's conntrack sysctls
// alone (maxPerCore 0, zero timeouts: pkg/proxy/../cmd/kube-proxy/app
// server_linux.go setupConntrack changes only what is set above zero).
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {{kubeconfig}}
hostnameOverride: {{node}}
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:{{healthz}}
metricsBindAddress: 127.0.0.1:{{metrics}}
bindAddressHardFail: true
mode: iptables
clusterCIDR: {{cidr}}
detectLocalMode: ClusterCIDR
# root here cannot lower its own oom_score_adj (see the kubelet's oomScoreAdj).
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// startKubeProxy starts kube-proxy for this node, waits until it has synced
// its rules once (healthz answers 200 only then), and installs
// APIServerChain.
func (n *Node) startKubeProxy(ctx context.Context, bin, podSubnet string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	// The bootstrap ClusterRoleBinding system:node-proxier grants the user
	// system:kube-proxy what kube-proxy reads.
	kc, err := n.cp.componentKubeconfig(KubeProxy, "system:kube-proxy", nil)
	if err != nil {
		return err
	}
	cfg := filepath.Join(n.RunDir, "kube-proxy-config.yaml")
	vars := map[string]string{"kubeconfig": kc, "node": n.Name, "healthz": itoa(ports[0]), "metrics": itoa(ports[1]), "cidr": podSubnet}
	if err := os.WriteFile(cfg, []byte(render(kubeProxyConfig, vars)), 0o644); err != nil {
		return fmt.Errorf("write kube-proxy config: %w", err)
	}
	p, err := startProcess(n.cp.RunDir, KubeProxy, bin, []string{"--config=" + cfg, "--v=1"}, nil)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	healthz := "http://127.0.0.1:" + itoa(ports[0]) + "/healthz"
	if err := waitFor(ctx, "kube-proxy /healthz", 60*time.Second, p, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, healthz)
	}); err != nil {
		return err
	}
	// kube-proxy prepends its jump to PREROUTING on its first sync, which
	// may come after /healthz answers; ours must go in front of it (kube-proxy
	// later only checks that its jump exists, so the order stays).
	if err := waitFor(ctx, "kube-proxy's KUBE-SERVICES jump", 60*time.Second, p, func(context.Context) (bool, error) {
		err := exec.Command("iptables", "-t", "nat", "-C", "PREROUTING", "-m", "comment", "--comment",
			"kubernetes service portals", "-j", "KUBE-SERVICES").Run()
		return err == nil, nil
	}); err != nil {
		return err
	}
	return installAPIServerChain(n.cp.Server)
}

// installAPIServerChain creates APIServerChain with one DNAT rule for
// 10.0.0.1:443 to the apiserver's 127.0.0.1 port and jumps to it first from
// nat PREROUTING (for traffic from the pod bridge only).
func installAPIServerChain(server string) error {
	port := server[strings.LastIndex(server, ":")+1:]
	if err := writeSysctl("net/ipv4/conf/all/route_localnet", "1"); err != nil {
		return err
	}
	cmds := [][]string{
		{"-t", "nat", "-N", APIServerChain},
		{"-t", "nat", "-A", APIServerChain, "-d", KubernetesServiceIP + "/32", "-p", "tcp", "--dport", "443",
			"-m", "comment", "--comment", "sidecar-terminator local cluster: kubernetes Service to the apiserver on 127.0.0.1",
			"-j", "DNAT", "--to-destination", "127.0.0.1:" + port},
		{"-t", "nat", "-I", "PREROUTING", "1", "-i", Bridge, "-j", APIServerChain},
	}
	return iptables(cmds)
}

// iptables runs each command in order, stopping at the first that fails.
func iptables(cmds [][]string) error {
	for _, c := range cmds {
		if out, err := exec.Command("iptables", c...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

// KubeletChain is the harness's nat chain for the apiserver's connections
// to the kubelet (exec, logs, port-forward). The apiserver dials the Node's
// InternalIP, which may not be loopback (the kubelet refuses a loopback
// --node-ip), while the kubelet serves on 127.0.0.1 only; jumped to from nat
// OUTPUT for that address and port alone, it translates them to 127.0.0.1.
// Removed at `cluster down` with the other chains the harness adds (ours).
const KubeletChain = "ST-KUBELET"

func installKubeletChain(nodeIP string, port int) error {
	if err := writeSysctl("net/ipv4/conf/all/route_localnet", "1"); err != nil {
		return err
	}
	match := []string{"-d", nodeIP + "/32", "-p", "tcp", "--dport", itoa(port)}
	cmds := [][]string{
		{"-t", "nat", "-N", KubeletChain},
		append(append([]string{"-t", "nat", "-A", KubeletChain}, match...),
			"-m", "comment", "--comment", "sidecar-terminator local cluster: apiserver to the kubelet on 127.0.0.1",
			"-j", "DNAT", "--to-destination", "127.0.0.1:"+itoa(port)),
		append(append([]string{"-t", "nat", "-I", "OUTPUT", "1"}, match...), "-j", KubeletChain),
	}
	return iptables(cmds)
}

func sysctlPath(name string) string { return filepath.Join("/proc/sys", name) }

func readSysctl(name string) (string, error) {
	b, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func writeSysctl(name, value string) error {
	if err := os.WriteFile(sysctlPath(name), []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", name, value, err)
	}
	return nil
}
