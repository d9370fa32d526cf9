package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

// DefaultRunDir is where `cluster up` keeps its state, so that `cluster
// down` and `cluster status` in other processes find it.
const DefaultRunDir = "/tmp/sidecar-terminator-cluster"

// UpOptions for Up.
type UpOptions struct {
	// RunDir; empty means a new temporary dir. Up refuses a dir that holds
	// live processes from an earlier run.
	RunDir string
	// NoKruise skips kruise-manager and kruise-daemon (and the CRDs).
	NoKruise bool
	// Kruise: how OpenKruise runs (its own SidecarTerminator off and
	// kruise-daemon on by default).
	Kruise KruiseOptions
	// AuditLogPath as in Options.
	AuditLogPath string
	Logf         func(format string, args ...any)
}

// Cluster is the whole local cluster: control plane, node, OpenKruise.
type Cluster struct {
	*ControlPlane
	Node *Node
	// Controller is the sidecar-terminator process, once started.
	Controller *Controller
	// BinaryDefaultAllowlist starts the controller with the binary's own
	// quick-exit allowlist rather than the suites' explicit one.
	BinaryDefaultAllowlist bool
	// ControllerEnv is added to the controller process's environment
	// ("NAME=value"), as a Deployment's env would be.
	ControllerEnv []string
}

// Up builds what is missing and starts, in order: etcd and kube-apiserver,
// the Kruise CRDs (before kube-controller-manager, whose garbage collector
// only learns CRD types on a 30 s discovery refresh otherwise), KCM and the
// scheduler, the images, the node, kruise-manager and kruise-daemon. On
// error everything started is stopped and the host restored.
func Up(ctx context.Context, opts UpOptions) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the local cluster needs root: kubelet, containerd, cgroups and network namespaces")
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.RunDir != "" {
		if procs, _ := ReadPIDFiles(opts.RunDir); len(procs) > 0 {
			return nil, fmt.Errorf("%s holds a running cluster (%s pid %d); run `cluster down` first", opts.RunDir, procs[0].Name, procs[0].PID)
		}
		if err := os.RemoveAll(opts.RunDir); err != nil {
			return nil, fmt.Errorf("clear run dir %s: %w", opts.RunDir, err)
		}
	}
	t0 := time.Now()
	// Build everything first (in parallel with nothing else running), so a
	// cold cache shows up as build time, not as a start timeout.
	if _, err := KubernetesBinaries(ctx, AllKubernetesBinaries...); err != nil {
		return nil, err
	}
	if _, err := EtcdBinary(ctx); err != nil {
		return nil, err
	}
	if !opts.NoKruise {
		if _, err := KruiseBinaries(ctx); err != nil {
			return nil, err
		}
	}
	logf("binaries ready: %s", time.Since(t0).Round(time.Millisecond))

	cp, err := StartControlPlane(ctx, Options{RunDir: opts.RunDir, KeepRunDir: true, AuditLogPath: opts.AuditLogPath, Logf: logf,
		ControllerManager: true, Scheduler: true, BeforeControllers: func(ctx context.Context, cp *ControlPlane) error {
			if opts.NoKruise {
				return nil
			}
			files, err := KruiseCRDFiles(ctx)
			if err != nil {
				return err
			}
			return cp.InstallCRDs(ctx, files)
		}})
	if err != nil {
		return nil, err
	}
	c := &Cluster{ControlPlane: cp}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, fmt.Errorf("and stopping: %w", stopErr))
			}
		}
	}()
	t1 := time.Now()
	tars, err := oci.WriteAll(ctx, filepath.Join(cp.RunDir, "images"))
	if err != nil {
		return nil, err
	}
	logf("images built: %s", time.Since(t1).Round(time.Millisecond))
	t2 := time.Now()
	if c.Node, err = StartNode(ctx, cp, NodeOptions{Images: tars}); err != nil {
		return nil, err
	}
	logf("node Ready: %s; kubelet %s", time.Since(t2).Round(time.Millisecond), c.Node.KubeletVersion)
	if !opts.NoKruise {
		t3 := time.Now()
		if err := StartKruiseWith(ctx, cp, c.Node, opts.Kruise); err != nil {
			return nil, err
		}
		what := "kruise-manager and kruise-daemon"
		if opts.Kruise.NoDaemon {
			what = "kruise-manager (no kruise-daemon)"
		}
		logf("%s ready: %s", what, time.Since(t3).Round(time.Millisecond))
	}
	logf("cluster up in %s; kubeconfig %s", time.Since(t0).Round(time.Millisecond), cp.Kubeconfig)
	return c, nil
}

// SaveLogs copies the daemons' logs (<run>/logs) and the container logs
// (<run>/node/pod-logs) to dst, for a post-mortem after Stop removes the
// run dir.
func (c *Cluster) SaveLogs(dst string) error {
	for _, d := range []string{"logs", filepath.Join("node", "pod-logs")} {
		src := filepath.Join(c.RunDir, d)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := copyTree(src, filepath.Join(dst, filepath.Base(d))); err != nil {
			return fmt.Errorf("save %s: %w", d, err)
		}
	}
	return nil
}

// Stop stops the controller, the node (restoring the host) and the control
// plane, then removes the run dir if nothing was left behind.
func (c *Cluster) Stop() error {
	var errs []error
	if c.Controller != nil {
		if err := c.Controller.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := Down(c.RunDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
