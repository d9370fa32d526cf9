// Command kindnetd is the pod network of kind node images built offline
// (kind/cmd/kindimage): kind's own kindnetd cannot be built from modules the
// Go proxy serves, so node images built here carry this program under the
// name kind's manifest runs (kind's default CNI DaemonSet: hostNetwork,
// HOST_IP from the downward API, /etc/cni/net.d mounted). It does the part
// of kindnetd a kind cluster on one Docker network needs: on its node, a CNI
// config of ptp + host-local over the node's pod CIDR and portmap (the
// plugins kind's base image ships), and a route to every other node's pod
// CIDR through that node's address. No masquerading: offline clusters reach
// nothing outside. Nodes are re-read every 10 s.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const confFile = "/etc/cni/net.d/10-kindnet.conflist"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hostIP := os.Getenv("HOST_IP")
	if net.ParseIP(hostIP) == nil {
		log.Fatalf("HOST_IP=%q is not an address", hostIP)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	for {
		if err := sync(ctx, cs, hostIP); err != nil {
			log.Printf("sync: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

func sync(ctx context.Context, cs kubernetes.Interface, hostIP string) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, plan := range plan(nodes.Items, hostIP) {
		if plan.self {
			if err := writeConf(plan.cidr); err != nil {
				return err
			}
			continue
		}
		if out, err := exec.CommandContext(ctx, "ip", "route", "replace", plan.cidr, "via", plan.via).CombinedOutput(); err != nil {
			return fmt.Errorf("ip route replace %s via %s: %v: %s", plan.cidr, plan.via, err, out)
		}
	}
	return nil
}

// step is what to do for one node: its pod CIDR served here (self), or
// routed through its address.
type step struct {
	self bool
	cidr string
	via  string
}

// plan derives the steps from the nodes: only nodes with a pod CIDR and an
// internal address count; the node whose address is hostIP is this one.
func plan(nodes []corev1.Node, hostIP string) []step {
	var out []step
	for _, n := range nodes {
		if n.Spec.PodCIDR == "" {
			continue
		}
		var addr string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address).To4() != nil {
				addr = a.Address
				break
			}
		}
		if addr == "" {
			continue
		}
		out = append(out, step{self: addr == hostIP, cidr: n.Spec.PodCIDR, via: addr})
	}
	return out
}

// conf is the CNI config for a pod CIDR, the one kindnetd writes.
func conf(cidr string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "0.3.1",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"ranges":  []any{[]any{map[string]any{"subnet": cidr}}},
				},
				"mtu": 1500,
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}, "", "  ")
}

// writeConf writes the config if it changed, atomically (the runtime reads
// the directory any time).
func writeConf(cidr string) error {
	want, err := conf(cidr)
	if err != nil {
		return err
	}
	if have, err := os.ReadFile(confFile); err == nil && string(have) == string(want) {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(confFile), ".10-kindnet.tmp")
	if err := os.WriteFile(tmp, want, 0o644); err != nil {
		return err
	}
	log.Printf("pod CIDR %s: wrote %s", cidr, confFile)
	return os.Rename(tmp, confFile)
}
