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
	start, err := c.stopProcess(KubeAPIServer, grace)
	if err != nil {
		return err
	}
	p, err := start()
	if err != nil {
		return err
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

// stopProcess stops the control plane's process name (SIGTERM, then SIGKILL
// after grace) and returns what starts it again: the same binary, flags and
// environment, read from /proc before it stopped, in its place in procs.
func (c *ControlPlane) stopProcess(name string, grace time.Duration) (start func() (*Process, error), _ error) {
	var old *Process
	for _, p := range c.procs {
		if p.Name == name {
			old = p
		}
	}
	if old == nil {
		return nil, fmt.Errorf("no %s process", name)
	}
	argv, err := procStrings(old.PID, "cmdline")
	if err != nil {
		return nil, fmt.Errorf("read %s command line: %w", name, err)
	}
	env, err := procStrings(old.PID, "environ")
	if err != nil {
		return nil, fmt.Errorf("read %s environment: %w", name, err)
	}
	if err := old.Stop(grace); err != nil {
		return nil, err
	}
	return func() (*Process, error) {
		p, err := startProcess(c.RunDir, name, argv[0], argv[1:], env)
		if err != nil {
			return nil, err
		}
		for i, q := range c.procs {
			if q == old {
				c.procs[i] = p
			}
		}
		return p, nil
	}, nil
}

// procStrings reads a NUL-separated file of /proc/<pid>.
func procStrings(pid int, file string) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0}) {
		out = append(out, string(b))
	}
	return out, nil
}

// StopKruiseManager stops kruise-manager, as a crash or an upgrade would:
// its webhooks (failurePolicy Fail) then refuse CRR creates, and pod
// creates and updates outside control-plane namespaces, with a 500. The
// returned function starts it again and waits until it is ready.
func (c *ControlPlane) StopKruiseManager(grace time.Duration) (restart func(context.Context) error, _ error) {
	start, err := c.stopProcess(KruiseManager, grace)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		p, err := start()
		if err != nil {
			return err
		}
		return c.waitKruiseManager(ctx, p)
	}, nil
}
