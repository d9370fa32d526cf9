package cluster

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	kruiseModule    = "github.com/openkruise/kruise"
	KruiseNamespace = "kruise-system"
	KruiseManager   = "kruise-manager"
	KruiseDaemon    = "kruise-daemon"
)

// KruiseBinaries builds (once) kruise-manager and kruise-daemon. The kruise
// module's go.mod has replace directives, which `go install mod@version`
// refuses, so the module is copied to a writable dir and built there as the
// main module. The copy keeps a fixed path (<cache>/kruise-VERSION.src):
// without -trimpath, Go's build cache keys the main module's packages on
// their directory.
func KruiseBinaries(ctx context.Context) (map[string]string, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "kruise-"+KruiseVersion)
	return ensureBinaries(ctx, dir, []string{KruiseManager, KruiseDaemon}, func(tmp string, missing []string) error {
		work, err := kruiseSourceCopy(ctx, dir)
		if err != nil {
			return err
		}
		pkgs := map[string]string{KruiseManager: ".", KruiseDaemon: "./cmd/daemon"}
		for _, n := range missing {
			if err := goBuild(ctx, work, filepath.Join(tmp, n), "-ldflags", "-s -w", pkgs[n]); err != nil {
				return fmt.Errorf("build %s %s: %w", n, KruiseVersion, err)
			}
		}
		return nil
	})
}

// copyTree copies a read-only module dir into a writable one.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// StartKruise starts kruise-manager (webhook on 127.0.0.1, SidecarTerminator
// off: our controller decides, Kruise only executes CRRs) and waits for it
// to be ready, then kruise-daemon for the node, which finds containerd
// through the /hostvarrun symlink. The CRDs must already be installed.
func StartKruise(ctx context.Context, cp *ControlPlane, node *Node) error {
	return StartKruiseWith(ctx, cp, node, KruiseOptions{})
}

// KruiseOptions are the few ways a suite runs OpenKruise differently.
type KruiseOptions struct {
	// SidecarTerminator turns on OpenKruise's own SidecarTerminator, for
	// the suite that checks what the controller does beside it.
	SidecarTerminator bool
	// NoDaemon starts kruise-manager alone: a node kruise-daemon does not
	// serve, as a pool the DaemonSet excludes or a Fargate node is. The
	// manager then makes the node's NodeImage at once (NodeImagesAtOnce),
	// so a suite waits only its controller's --kruise-daemon-grace for the
	// node to show as daemon-less.
	NoDaemon bool
}

// StartKruiseWith is StartKruise with options.
func StartKruiseWith(ctx context.Context, cp *ControlPlane, node *Node, o KruiseOptions) error {
	bins, err := KruiseBinaries(ctx)
	if err != nil {
		return err
	}
	// The default 30 QPS throttles CRR handling in a burst of Jobs.
	if _, err := StartKruiseManager(ctx, cp, KruiseManagerOptions{SidecarTerminator: o.SidecarTerminator, QPS: 200, Burst: 400,
		NodeImagesAtOnce: o.NoDaemon}); err != nil {
		return err
	}
	if o.NoDaemon {
		return nil
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	return node.startKruiseDaemon(ctx, bins[KruiseDaemon], cp.Kubeconfig, ports[0])
}

// KruiseManagerOptions say how StartKruiseManager runs kruise-manager.
type KruiseManagerOptions struct {
	SidecarTerminator bool
	// QPS and Burst of its client (--rest-config-qps/--rest-config-burst);
	// 0 leaves the flag out, so kruise-manager runs with its own default.
	QPS, Burst int
	// User, if set, is the identity kruise-manager runs as (a client cert in
	// system:masters), so that an audit log tells its requests apart from
	// the admin's; empty runs it with the admin kubeconfig.
	User string
	// NodeImagesAtOnce makes a node's NodeImage as soon as the node is
	// ready rather than 30 s later (--nodeimage-creation-delay=0s; the
	// default is in pkg/controller/nodeimage/nodeimage_controller.go).
	NodeImagesAtOnce bool
}

// KruiseManagerArgs are kruise-manager's flags for o, its listeners on the
// given ports of 127.0.0.1.
func KruiseManagerArgs(o KruiseManagerOptions, metricsPort, healthPort int, protectionLog string) []string {
	args := []string{
		"--enable-leader-election=false",
		"--metrics-addr=127.0.0.1:" + itoa(metricsPort),
		"--health-probe-addr=127.0.0.1:" + itoa(healthPort),
		"--enable-pprof=false",
		fmt.Sprintf("--feature-gates=SidecarTerminator=%t", o.SidecarTerminator),
		"--protection-log-path=" + protectionLog,
		"--v=1",
	}
	if o.QPS > 0 {
		args = append(args, "--rest-config-qps="+itoa(o.QPS))
	}
	if o.Burst > 0 {
		args = append(args, "--rest-config-burst="+itoa(o.Burst))
	}
	if o.NodeImagesAtOnce {
		args = append(args, "--nodeimage-creation-delay=0s")
	}
	return args
}

// StartKruiseManager starts kruise-manager alone (webhook on 127.0.0.1, no
// kruise-daemon) and waits until it is ready. It registers kruise's webhook
// configurations first, as kruise-manager needs them to exist; with
// failurePolicy Fail they then hold every pod create and CRR create until
// RemoveKruiseWebhookConfigs. The CRDs must already be installed. The
// process is also stopped with the control plane.
func StartKruiseManager(ctx context.Context, cp *ControlPlane, o KruiseManagerOptions) (*Process, error) {
	bins, err := KruiseBinaries(ctx)
	if err != nil {
		return nil, err
	}
	src, err := moduleDir(ctx, kruiseModule, KruiseVersion)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cp.RestConfig)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KruiseNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", KruiseNamespace, err)
	}
	if err := installKruiseWebhookConfigs(ctx, cs, src); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cp.RunDir, "kruise")
	for _, d := range []string{filepath.Join(dir, "certs"), filepath.Join(dir, "protection-log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// Kruise is infrastructure here, not what is under test: it runs in
	// system:masters rather than with its own RBAC.
	kubeconfig := cp.Kubeconfig
	if o.User != "" {
		if kubeconfig, err = cp.UserKubeconfig(KruiseManager, o.User, []string{"system:masters"}); err != nil {
			return nil, err
		}
	}
	env := []string{"KUBECONFIG=" + kubeconfig, "POD_NAMESPACE=" + KruiseNamespace,
		"WEBHOOK_HOST=127.0.0.1", "WEBHOOK_PORT=" + itoa(ports[0]), "WEBHOOK_CERT_DIR=" + filepath.Join(dir, "certs")}
	mgr, err := startProcess(cp.RunDir, KruiseManager, bins[KruiseManager],
		KruiseManagerArgs(o, ports[1], ports[2], filepath.Join(dir, "protection-log")), env)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, mgr)
	cp.kruiseHealth = "http://127.0.0.1:" + itoa(ports[2]) + "/readyz"
	if err := cp.waitKruiseManager(ctx, mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// waitKruiseManager waits until kruise-manager is ready: its webhooks serve.
func (cp *ControlPlane) waitKruiseManager(ctx context.Context, mgr *Process) error {
	return waitFor(ctx, "kruise-manager ready", 90*time.Second, mgr, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, cp.kruiseHealth)
	})
}

func (n *Node) startKruiseDaemon(ctx context.Context, bin, kubeconfig string, port int) error {
	target := filepath.Dir(filepath.Dir(n.Socket)) // <node run dir>/hostvarrun
	if cur, err := os.Readlink(HostVarRun); err == nil && cur != target {
		return fmt.Errorf("%s already points to %s (another cluster running?)", HostVarRun, cur)
	} else if err != nil {
		if _, statErr := os.Lstat(HostVarRun); statErr == nil {
			return fmt.Errorf("%s exists and is not our symlink; refusing to replace it", HostVarRun)
		}
		if err := os.Symlink(target, HostVarRun); err != nil {
			return fmt.Errorf("link %s -> %s: %w", HostVarRun, target, err)
		}
	}
	p, err := startProcess(n.cp.RunDir, KruiseDaemon, bin, []string{
		"--addr=127.0.0.1:" + itoa(port),
		"--enable-pprof=false",
		"--v=1",
	}, []string{"KUBECONFIG=" + kubeconfig, "NODE_NAME=" + n.Name})
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return waitFor(ctx, "kruise-daemon healthz", 60*time.Second, p, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, "http://127.0.0.1:"+itoa(port)+"/healthz")
	})
}
