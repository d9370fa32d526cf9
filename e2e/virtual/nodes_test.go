package virtual

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVirtualNodesRegisterAsServerlessNodes: each node is Ready, carries the
// label the controller selects virtual nodes by and the taint that keeps
// other pods off, has room for thousands of pods, and the process serves
// nothing on any address.
func TestVirtualNodesRegisterAsServerlessNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range virtualNodes {
		n, err := suite.clients.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["type"] != "virtual-kubelet" {
			t.Errorf("%s labels %v: want type=virtual-kubelet", name, n.Labels)
		}
		tainted := false
		for _, taint := range n.Spec.Taints {
			tainted = tainted || (taint.Key == "virtual-kubelet.io/provider" && taint.Value == "mock" && taint.Effect == corev1.TaintEffectNoSchedule)
		}
		if !tainted {
			t.Errorf("%s taints %v: want virtual-kubelet.io/provider=mock:NoSchedule", name, n.Spec.Taints)
		}
		if pods := n.Status.Allocatable.Pods().Value(); pods < 1000 {
			t.Errorf("%s allocatable pods %d, want thousands", name, pods)
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			t.Errorf("%s is not Ready: %+v", name, n.Status.Conditions)
		}
	}
	listening, err := listeningSockets(suite.nodes.Process.PID)
	if err != nil {
		t.Fatal(err)
	}
	if len(listening) > 0 {
		t.Errorf("mock-node listens on %v; it should serve nothing", listening)
	}
}

// listeningSockets returns the local addresses (hex, as /proc shows them)
// of the TCP sockets in LISTEN state that the process holds.
func listeningSockets(pid int) ([]string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) > 9 && f[3] == "0A" && inodes[f[9]] {
				out = append(out, table+" "+f[1])
			}
		}
		f.Close()
	}
	return out, nil
}
