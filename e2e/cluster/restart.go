package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after grace)
// and starts it again with the same binary and flags, on the same port, and
// waits until it serves again: a control-plane restart as an upgrade or a
// crash would cause, for reliability runs.
func (c *ControlPlane) RestartAPIServer(ctx context.Context, grace time.Duration) error {
	var old *Process
	for _, p := range c.procs {
		if p.Name == KubeAPIServer {
			old = p
		}
	}
	if old == nil {
		return fmt.Errorf("no kube-apiserver process")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", old.PID))
	if err != nil {
		return fmt.Errorf("read kube-apiserver command line: %w", err)
	}
	argv := bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0})
	bin, args := string(argv[0]), make([]string, 0, len(argv)-1)
	for _, a := range argv[1:] {
		args = append(args, string(a))
	}
	if err := old.Stop(grace); err != nil {
		return err
	}
	p, err := startProcess(c.RunDir, KubeAPIServer, bin, args, nil)
	if err != nil {
		return err
	}
	for i, q := range c.procs {
		if q == old {
			c.procs[i] = p
		}
	}
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		return err
	}
	return waitFor(ctx, "kube-apiserver /readyz after restart", 90*time.Second, p, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			return false, nil
		}
		_, err = cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err == nil, nil
	})
}
