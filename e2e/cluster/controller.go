package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// The controller's identity, as its deploy manifests define it.
const (
	ControllerName      = "sidecar-terminator"
	ControllerNamespace = "sidecar-terminator-system"
	// ControllerRBAC is relative to the repository root.
	ControllerRBAC = "controller/deploy/base/rbac.yaml"
	// ControllerPackage is built into <repo>/bin/sidecar-terminator.
	ControllerPackage = "./controller/cmd/sidecar-terminator"
)

// Controller is the sidecar-terminator process.
type Controller struct {
	Process *Process
	// MetricsURL and HealthURL are on 127.0.0.1.
	MetricsURL, HealthURL string
	// Kubeconfig authenticates as the controller's ServiceAccount.
	Kubeconfig string
}

// BuildController builds the controller binary from the repository at root
// into root/bin, as its image has it (images.BuildEnv, images.BuildFlags),
// and returns its path: what the suites and the bench run, and measure, is
// the binary that ships, however they were started.
func BuildController(ctx context.Context, root string) (string, error) {
	out := filepath.Join(root, "bin", ControllerName)
	cmd := images.GoBuild(ctx, root, out, ControllerPackage)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build controller: %w: %s", err, tail(string(b), 4000))
	}
	return out, nil
}

// ApplyControllerRBAC creates the objects of the controller's RBAC manifest
// (ServiceAccount, ClusterRole, bindings, Role for leases) and its namespace.
func (c *ControlPlane) ApplyControllerRBAC(ctx context.Context, root string) error {
	if err := c.EnsureNamespace(ctx, ControllerNamespace); err != nil {
		return err
	}
	return c.ApplyFile(ctx, filepath.Join(root, ControllerRBAC))
}

// ApplyFile creates every object of a multi-document YAML file (existing
// ones are left as they are).
func (c *ControlPlane) ApplyFile(ctx context.Context, path string) error {
	objs, err := readYAMLObjects(path)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.RestConfig)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("map %s in %s: %w", gvk, path, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			if err := c.EnsureNamespace(ctx, ns); err != nil {
				return err
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s from %s: %w", gvk.Kind, o.GetName(), path, err)
		}
	}
	return nil
}

// StartController runs the controller binary with a kubeconfig for its own
// ServiceAccount (so its RBAC is what is tested, not system:masters) and
// waits for /readyz. extraArgs are appended to the standard flags.
func (c *Cluster) StartController(ctx context.Context, bin string, extraArgs ...string) (*Controller, error) {
	if c.Controller != nil && c.Controller.Process.Alive() {
		return nil, errors.New("controller already running")
	}
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ControllerNamespace).Get(ctx, ControllerName, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("serviceaccount %s/%s (apply %s first): %w", ControllerNamespace, ControllerName, ControllerRBAC, err)
	}
	kc, err := c.ServiceAccountKubeconfig(ctx, ControllerNamespace, ControllerName)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kc,
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:" + itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + itoa(ports[1]),
		"--virtual-node-selector=type=virtual-kubelet",
	}
	if !c.BinaryDefaultAllowlist {
		// Said explicitly rather than left to the binary's default: the
		// suites swap in the image they import (images.QuickExit, any tag
		// or digest of its repository), and nothing else.
		args = append(args, "--quick-exit-image-allowlist="+QuickExitRepository())
	}
	args = append(args, extraArgs...)
	env := append([]string{"POD_NAMESPACE=" + ControllerNamespace}, c.ControllerEnv...)
	p, err := startProcess(c.RunDir, ControllerName, bin, args, env)
	if err != nil {
		return nil, err
	}
	ctl := &Controller{Process: p, Kubeconfig: kc,
		MetricsURL: "http://127.0.0.1:" + itoa(ports[0]) + "/metrics",
		HealthURL:  "http://127.0.0.1:" + itoa(ports[1])}
	c.Controller = ctl
	if err := waitFor(ctx, "controller /readyz", 60*time.Second, p, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, ctl.HealthURL+"/readyz")
	}); err != nil {
		_ = ctl.Stop()
		return nil, err
	}
	return ctl, nil
}

// Stop sends SIGTERM and waits (SIGKILL after 15 s).
func (ctl *Controller) Stop() error {
	if ctl == nil || ctl.Process == nil {
		return nil
	}
	return ctl.Process.Stop(15 * time.Second)
}

// LogTail is the end of the controller log, for failure messages.
func (ctl *Controller) LogTail(n int) string {
	if ctl == nil || ctl.Process == nil {
		return ""
	}
	return ctl.Process.LogTail(n)
}

// BuildAndStartController builds the controller from this repository,
// applies its RBAC and starts it, as `cluster up --controller` and the demo do.
func (c *Cluster) BuildAndStartController(ctx context.Context, extraArgs ...string) (*Controller, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	bin, err := BuildController(ctx, root)
	if err != nil {
		return nil, err
	}
	if err := c.ApplyControllerRBAC(ctx, root); err != nil {
		return nil, err
	}
	return c.StartController(ctx, bin, extraArgs...)
}

// QuickExitRepository is the repository of the quick-exit image the suites
// import, which the test controllers allow.
func QuickExitRepository() string {
	ref := images.QuickExit.Ref
	return ref[:strings.LastIndex(ref, ":")]
}
