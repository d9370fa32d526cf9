package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MockNodePackage is the mock virtual-kubelet node's main package, built
// into <repo>/bin/mock-node.
const MockNodePackage = "./e2e/virtualnode/cmd/mock-node"

// BuildMockNode builds the mock virtual node binary from the repository at
// root into root/bin and returns its path.
func BuildMockNode(ctx context.Context, root string) (string, error) {
	out := filepath.Join(root, "bin", "mock-node")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, MockNodePackage)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build mock-node: %w: %s", err, tail(string(b), 4000))
	}
	return out, nil
}

// VirtualNodes is one mock-node process running several virtual nodes.
type VirtualNodes struct {
	Process *Process
	Names   []string
}

// StartVirtualNodes runs the mock-node binary for the named nodes (one
// process, the admin kubeconfig) and waits until every node is Ready. The
// process is stopped with the control plane, before the apiserver.
// A name may carry the provider profile its node plays (name=profile);
// extraArgs are mock-node flags (e.g. --pull-delay, --unpullable).
func (c *ControlPlane) StartVirtualNodes(ctx context.Context, bin string, names []string, extraArgs ...string) (*VirtualNodes, error) {
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	args := append([]string{"--kubeconfig=" + c.Kubeconfig, "--nodes=" + strings.Join(names, ",")}, extraArgs...)
	p, err := startProcess(c.RunDir, "mock-node-"+names[0], bin, args, nil)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	for _, name := range names {
		name, _, _ := strings.Cut(name, "=") // name=profile
		if err := waitFor(ctx, "virtual node "+name+" Ready", 60*time.Second, p, func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return nil, err
		}
	}
	return &VirtualNodes{Process: p, Names: names}, nil
}

// Stop stops the mock-node process (its nodes stay registered and turn
// NotReady once their leases expire).
func (v *VirtualNodes) Stop() error {
	if v == nil || v.Process == nil {
		return nil
	}
	return v.Process.Stop(10 * time.Second)
}
