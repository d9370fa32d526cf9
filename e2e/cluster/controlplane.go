package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options for StartControlPlane.
type Options struct {
	// RunDir holds certificates, kubeconfigs, data, logs and PID files.
	// Empty: a new temporary directory.
	RunDir string
	// KeepRunDir leaves RunDir in place at Stop (logs for a post-mortem).
	KeepRunDir bool
	// AuditLogPath, if set, makes the apiserver log every mutating request
	// at Metadata level there (one JSON event per line).
	AuditLogPath string
	// ControllerManager starts kube-controller-manager (Job controller,
	// garbage collector, service accounts, root CA ConfigMaps).
	ControllerManager bool
	// Scheduler starts kube-scheduler; without it pods need spec.nodeName.
	Scheduler bool
	// BeforeControllers runs once the apiserver is ready and before KCM
	// and the scheduler start, e.g. to install CRDs that KCM's garbage
	// collector should know from its first discovery.
	BeforeControllers func(ctx context.Context, cp *ControlPlane) error
	// Logf, if set, receives one line per step with its duration.
	Logf func(format string, args ...any)
	// Profiling serves kube-apiserver's /debug/pprof (to system:masters
	// and whoever RBAC lets read it), for the bench's profiles of the
	// server during a burst.
	Profiling bool
}

// ControlPlane is a running etcd + kube-apiserver (+ optional
// kube-controller-manager and kube-scheduler) on 127.0.0.1.
type ControlPlane struct {
	RunDir string
	// Server is the apiserver URL, https://127.0.0.1:PORT.
	Server string
	// Kubeconfig is the path of an admin (system:masters) kubeconfig.
	Kubeconfig string
	// RestConfig is the admin config, for clients in this process.
	RestConfig *rest.Config
	PKI        *PKI

	opts   Options
	hasKCM bool
	procs  []*Process // in start order
	// kruiseHealth is kruise-manager's readiness URL, once started.
	kruiseHealth string
}

// StartControlPlane builds (if not cached) and starts the control plane. On
// error everything it started is stopped again.
func StartControlPlane(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	names := []string{KubeAPIServer}
	if opts.ControllerManager {
		names = append(names, KubeControllerManager)
	}
	if opts.Scheduler {
		names = append(names, KubeScheduler)
	}
	t0 := time.Now()
	bins, err := KubernetesBinaries(ctx, names...)
	if err != nil {
		return nil, err
	}
	etcdBin, err := EtcdBinary(ctx)
	if err != nil {
		return nil, err
	}
	// No line of its own for the builds: "control plane up in" includes
	// them, and Up, which builds everything first, reports them once.

	if opts.RunDir == "" {
		if opts.RunDir, err = os.MkdirTemp("", "st-cluster-"); err != nil {
			return nil, fmt.Errorf("create run dir: %w", err)
		}
	} else if err := os.MkdirAll(opts.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("create run dir: %w", err)
	}
	c := &ControlPlane{RunDir: opts.RunDir, opts: opts, hasKCM: opts.ControllerManager}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.PKI, err = newPKI(filepath.Join(c.RunDir, "pki")); err != nil {
		return nil, err
	}
	t1 := time.Now()
	etcdURL, err := c.startEtcd(ctx, etcdBin)
	if err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, bins[KubeAPIServer], etcdURL); err != nil {
		return nil, err
	}
	opts.Logf("etcd + kube-apiserver ready in %s", time.Since(t1).Round(time.Millisecond))
	if opts.BeforeControllers != nil {
		if err := opts.BeforeControllers(ctx, c); err != nil {
			return nil, err
		}
	}
	if opts.ControllerManager {
		if err := c.startControllerManager(ctx, bins[KubeControllerManager]); err != nil {
			return nil, err
		}
	} else if err := c.EnsureNamespace(ctx, metav1.NamespaceDefault); err != nil {
		return nil, err
	}
	if opts.Scheduler {
		if err := c.startScheduler(bins[KubeScheduler]); err != nil {
			return nil, err
		}
	}
	opts.Logf("control plane up in %s", time.Since(t0).Round(time.Millisecond))
	return c, nil
}

func (c *ControlPlane) start(name, bin string, args []string) (*Process, error) {
	p, err := startProcess(c.RunDir, name, bin, args, nil)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *ControlPlane) startEtcd(ctx context.Context, bin string) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	client := "http://127.0.0.1:" + itoa(ports[0])
	peer := "http://127.0.0.1:" + itoa(ports[1])
	p, err := c.start(Etcd, bin, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.RunDir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		// A throwaway test cluster: fsync only costs time on a shared disk.
		"--unsafe-no-fsync",
		// The scale tier (150,000 pods, then 20,000-pod bursts created,
		// updated and deleted by each terminator) and 10,000 kwok Jobs write
		// more than etcd's default quota of 2 GiB holds before a compaction
		// frees pages, and past it every write fails ("database space
		// exceeded"). The quota only bounds the database file: 8 GiB, etcd's
		// suggested maximum.
		"--quota-backend-bytes=" + strconv.FormatInt(8<<30, 10),
		"--log-level=warn",
	})
	if err != nil {
		return "", err
	}
	return client, waitFor(ctx, "etcd health", 30*time.Second, p, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, client+"/health")
	})
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: Metadata
  verbs: ["get"]
  resources:
  - group: apps.kruise.io
    resources: ["containerrecreaterequests"]
  - group: batch
    resources: ["jobs"]
- level: None
`

func (c *ControlPlane) startAPIServer(ctx context.Context, bin, etcdURL string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.Server = "https://127.0.0.1:" + itoa(port)
	serving, servingKey, err := c.PKI.issue("apiserver", "kube-apiserver", nil,
		[]string{"127.0.0.1", "10.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return err
	}
	// The advertised address is what the kubernetes Service's Endpoints
	// name: it may not be loopback (Endpoints validation refuses it), so it
	// is the node's recorded address. The apiserver still listens on
	// 127.0.0.1 only; pods reach it through APIServerChain.
	advertise, err := nodeIP()
	if err != nil {
		return err
	}
	// The apiserver's own client certificate towards kubelets (exec, logs,
	// port-forward): the kubelet authenticates x509 only.
	kcert, kkey, err := c.PKI.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", nil, nil)
	if err != nil {
		return err
	}
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--kubelet-client-certificate=" + kcert, "--kubelet-client-key=" + kkey,
		// Never the Hostname address (the node's name, looked up in DNS,
		// off this host): the InternalIP, which KubeletChain sends to the
		// kubelet on 127.0.0.1.
		"--kubelet-preferred-address-types=InternalIP",
		"--bind-address=127.0.0.1", "--advertise-address=" + advertise, "--secure-port=" + itoa(port),
		"--cert-dir=" + filepath.Join(c.RunDir, "apiserver-certs"),
		"--tls-cert-file=" + serving, "--tls-private-key-file=" + servingKey,
		"--client-ca-file=" + c.PKI.CAFile(),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.PKI.SAPubFile(),
		"--service-account-signing-key-file=" + c.PKI.SAKeyFile(),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--profiling=" + strconv.FormatBool(c.opts.Profiling),
	}
	if c.opts.AuditLogPath != "" {
		policy := filepath.Join(c.RunDir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return fmt.Errorf("write audit policy: %w", err)
		}
		// One file, never rotated (the default rotates at 100 MB, which a
		// benchmark of several bursts passes, and readers read one file), and
		// a buffer that holds a burst rather than dropping from it.
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+c.opts.AuditLogPath,
			"--audit-log-format=json", "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s",
			"--audit-log-maxsize=1000000", "--audit-log-batch-buffer-size=200000")
	}
	p, err := c.start(KubeAPIServer, bin, args)
	if err != nil {
		return err
	}
	cert, key, err := c.PKI.issue("admin", "admin", []string{"system:masters"}, nil)
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.RunDir, "kubeconfigs", "admin")
	if err := writeKubeconfig(c.Kubeconfig, c.Server, c.PKI.CAFile(), credentials{certFile: cert, keyFile: key}); err != nil {
		return err
	}
	if c.RestConfig, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return fmt.Errorf("load admin kubeconfig: %w", err)
	}
	// Tests create bursts of objects; client-go's default 5 QPS would make
	// the harness, not the cluster, the bottleneck.
	c.RestConfig.QPS, c.RestConfig.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	return waitFor(ctx, "kube-apiserver /readyz", 90*time.Second, p, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		if string(body) != "ok" {
			return false, errors.New(string(body))
		}
		// RBAC bootstrap roles are created after readyz on some versions;
		// components started next need them.
		_, err = cs.RbacV1().ClusterRoles().Get(ctx, "system:kube-controller-manager", metav1.GetOptions{})
		return err == nil, err
	})
}

// componentKubeconfig issues a client cert for user and writes a kubeconfig.
func (c *ControlPlane) componentKubeconfig(name, user string, groups []string) (string, error) {
	cert, key, err := c.PKI.issue(name, user, groups, nil)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.RunDir, "kubeconfigs", name)
	return path, writeKubeconfig(path, c.Server, c.PKI.CAFile(), credentials{certFile: cert, keyFile: key})
}

// startControllerManager runs kube-controller-manager with the arguments
// every cluster of the harness needs, then extra (the kwok cluster picks its
// controllers and client limits), and waits until its controllers run.
func (c *ControlPlane) startControllerManager(ctx context.Context, bin string, extra ...string) error {
	kc, err := c.componentKubeconfig(KubeControllerManager, "system:kube-controller-manager", nil)
	if err != nil {
		return err
	}
	p, err := c.start(KubeControllerManager, bin, append([]string{
		"--kubeconfig=" + kc,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--cert-dir=" + filepath.Join(c.RunDir, "kcm-certs"),
		// Without these: kube-root-ca.crt gets an empty ca.crt, no token
		// signing key for legacy paths, and a plugin dir created under /usr.
		"--root-ca-file=" + c.PKI.CAFile(),
		"--service-account-private-key-file=" + c.PKI.SAKeyFile(),
		"--flex-volume-plugin-dir=" + filepath.Join(c.RunDir, "flexvolume"),
		// Each controller then acts as its own kube-system ServiceAccount with
		// its bootstrap system:controller:* role, as in a real cluster; the
		// KCM identity alone may not, e.g., untaint nodes or publish CAs.
		"--use-service-account-credentials=true",
	}, extra...))
	if err != nil {
		return err
	}
	c.hasKCM = true
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	// The default ServiceAccount appearing means its controllers run.
	return waitFor(ctx, "kube-controller-manager creates serviceaccount default/default", 60*time.Second, p, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// startScheduler runs kube-scheduler, with extra arguments after the
// harness's own (the kwok cluster raises its client limits).
func (c *ControlPlane) startScheduler(bin string, extra ...string) error {
	kc, err := c.componentKubeconfig(KubeScheduler, "system:kube-scheduler", nil)
	if err != nil {
		return err
	}
	_, err = c.start(KubeScheduler, bin, append([]string{
		"--kubeconfig=" + kc,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0",
	}, extra...))
	return err
}

// Processes returns the processes of the control plane, in start order.
func (c *ControlPlane) Processes() []*Process { return append([]*Process(nil), c.procs...) }

// Stop kills every process by PID, newest first, and removes the run dir
// unless KeepRunDir. It is safe to call twice.
func (c *ControlPlane) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].Stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	c.procs = nil
	if !c.opts.KeepRunDir && c.RunDir != "" {
		if err := os.RemoveAll(c.RunDir); err != nil {
			errs = append(errs, fmt.Errorf("remove run dir: %w", err))
		}
	}
	return errors.Join(errs...)
}
