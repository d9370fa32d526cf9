// Package chart installs the Helm chart into the local real cluster
// (e2e/cluster) the way users run the controller: the chart's Deployment on
// the real node, from the controller image imported into containerd, with
// in-cluster configuration and its own ServiceAccount. One Job with a
// sidecar must then complete through it. Needs root, like e2e/realnode.
//
//	go test ./e2e/chart -count=1 -v
package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

func skipUnlessHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	msg := "the local cluster needs root (kubelet, containerd, cgroups, network namespaces)"
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and " + msg)
	}
	t.Skip("SKIPPED, NOT PASSED: " + msg)
}

func TestChartOnLocalCluster(t *testing.T) {
	skipUnlessHost(t)
	e := newTestEnv(t, 30*time.Minute)
	ctx, root := e.ctx, e.root
	logf := func(f string, a ...any) { t.Logf("harness: "+f, a...) }

	auditLog := filepath.Join(t.TempDir(), "audit.log")
	c, err := cluster.Up(ctx, cluster.UpOptions{AuditLogPath: auditLog, Logf: logf})
	if err != nil {
		t.Fatalf("bring the cluster up: %v", err)
	}
	t.Cleanup(func() {
		if dst := os.Getenv("E2E_LOGS_DIR"); dst != "" {
			if err := c.SaveLogs(filepath.Join(dst, "chart")); err != nil {
				t.Logf("save logs: %v", err)
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("tear down (something may be left behind): %v", err)
		}
	})

	// The images users run, in the release format (an OCI layout holding an
	// image index, what kind load image-archive reads), for this host's
	// architecture only to keep the build short, imported into the node's
	// containerd: the chart's pods must not pull.
	t0 := time.Now()
	for _, spec := range []images.Spec{images.Controller, images.MockNode} {
		idx, err := oci.BuildIndex(ctx, root, spec, []string{runtime.GOARCH})
		if err != nil {
			t.Fatal(err)
		}
		refs := []string{spec.Ref}
		if spec.Dir == images.Controller.Dir {
			// Also under the tag the chart's defaults name, which the
			// README's install uses.
			def, err := deploy.DefaultControllerImage(ctx, e.helm, root)
			if err != nil {
				t.Fatal(err)
			}
			refs = append(refs, def)
		}
		for i, ref := range refs {
			tar := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.tar", spec.Dir, i))
			if err := oci.WriteIndexTarball(tar, ref, idx); err != nil {
				t.Fatal(err)
			}
			if err := c.Node.ImportImages(ctx, tar); err != nil {
				t.Fatal(err)
			}
		}
	}
	logf("controller and mock-node images built and imported: %s", time.Since(t0).Round(time.Millisecond))

	// INSTALL.md's local-cluster install command, as written (helm on PATH,
	// the chart's defaults), then one Job through it on the real node.
	t1 := time.Now()
	cmdline, out, err := runLocalInstall(ctx, t, root, e.helm, c.Kubeconfig)
	if err != nil {
		t.Fatalf("INSTALL.md install `%s`: %v\n%s", cmdline, err, out)
	}
	logf("INSTALL.md install `%s`: %s\n%s", cmdline, time.Since(t1).Round(time.Millisecond), out)
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		dep, err := cs.AppsV1().Deployments(deploy.Namespace).Get(ctx, deploy.ReleaseName, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(dep.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
			return c.Type == "Available" && c.Status == corev1.ConditionTrue
		}), nil
	}); err != nil {
		t.Fatalf("Deployment not Available 3 minutes after INSTALL.md's install: %v", err)
	}
	pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sidecar-terminator"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("controller pods: %d, want the chart's 2 replicas; %v", len(pods.Items), err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != c.Node.Name || p.Spec.ServiceAccountName != deploy.ReleaseName || p.Spec.HostNetwork {
			t.Errorf("controller pod %s on node %q as %q (host network %v), want the real node as %q on the pod network",
				p.Name, p.Spec.NodeName, p.Spec.ServiceAccountName, p.Spec.HostNetwork, deploy.ReleaseName)
		}
	}
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	cl := cases.Clients{Kube: cs, Dynamic: dyn}
	obs := cases.InstalledControllerCompletesAJob(ctx, t, cl, "chart-job", "e2e-chart")
	if obs.Pod != nil {
		checkNotes(ctx, t, root, c.Kubeconfig, out, obs.Pod)
	}

	// kind/install.sh, the script kind/up.sh runs on kind: our chart again
	// (an upgrade, with kind/values.yaml) and the mock virtual node's chart,
	// both waited for in-cluster: pod network, the kubernetes Service, the
	// ServiceAccount token and CA the kubelet mounts.
	t2 := time.Now()
	if out, err := runInstallScript(ctx, root, c.Kubeconfig); err != nil {
		t.Fatalf("kind/install.sh: %v\n%s", err, out)
	} else {
		logf("kind/install.sh: %s\n%s", time.Since(t2).Round(time.Millisecond), out)
	}
	if err := cases.WaitLeader(ctx, cs); err != nil {
		t.Fatal(err)
	}

	// The same kind of Job on the mock virtual node, in-cluster from its
	// chart: stopped by an image swap, with no CRR.
	withImage := cases.Sidecar(cases.VirtualSidecar, "exit:0", false).With(cases.EnvWhenJobExitWithImage, images.QuickExit.Ref)
	vjs := cases.VirtualJob("chart-virtual", corev1.RestartPolicyNever, cases.Main(cases.VirtualMain, 2, 0), withImage)
	if err := cases.CreateNamespace(ctx, cs, vjs.Namespace); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.BatchV1().Jobs(vjs.Namespace).Create(ctx, cases.OnVirtualNode(vjs.Build()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vobs := cases.RunAndCheck(ctx, t, cl, vjs.Namespace, vjs.Name, 3*time.Minute, cases.Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded,
		ExitCodes: map[string]int32{cases.VirtualMain: 0, cases.VirtualSidecar: 0}, Event: true})
	if vobs.Pod == nil || vobs.Pod.Spec.NodeName != "mock-virtual-node" {
		t.Errorf("virtual Job's pod not on the mock virtual node: %+v", vobs.Pod)
	}

	// The CRR was written by the chart's ServiceAccount, i.e. by the pod
	// under in-cluster configuration, not by some other client.
	writes, err := cluster.MutatingRequests(auditLog, cluster.ControllerServiceAccountUser)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(writes, func(w string) bool { return strings.HasPrefix(w, "create containerrecreaterequests ") }) {
		t.Errorf("no CRR created by %s; its writes: %v", cluster.ControllerServiceAccountUser, writes)
	}
}

// runInstallScript runs kind/install.sh against the local cluster exactly
// as kind/up.sh runs it on kind: no extra values. Its pods reach the API
// server in-cluster, through the kubernetes Service (the local cluster runs
// kube-proxy, e2e/cluster/kubeproxy.go).
func runInstallScript(ctx context.Context, root, kubeconfig string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "kind", "install.sh"))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	return cmd.CombinedOutput()
}

// checkNotes runs, verbatim, every command the chart's NOTES (as helm
// printed them after the install) give a user: `kubectl rollout status`,
// the plugin's `kubectl sidecar-terminator explain` and `kubectl exec
// deploy/... -- /sidecar-terminator explain`, with NAMESPACE and POD filled
// in for the finished pod. On PATH: the kubectl of the cluster's own
// Kubernetes build and the kubectl plugin, built from the checkout. Each
// explain must name the pod and show the controller's event; the plugin's
// must also read the release's settings from its Deployment, the
// in-container one runs under the controller's own ServiceAccount and flags.
func checkNotes(ctx context.Context, t *testing.T, root, kubeconfig string, installOut []byte, pod *corev1.Pod) {
	t.Helper()
	cmds := notesCommands(string(installOut))
	if len(cmds) != 3 || !slices.ContainsFunc(cmds, func(c string) bool { return strings.HasPrefix(c, "kubectl sidecar-terminator explain ") }) {
		t.Fatalf("the NOTES printed by helm give %q, want 3 commands (rollout status, the plugin's explain, exec explain)\n%s", cmds, installOut)
	}
	plugin := filepath.Join(t.TempDir(), "kubectl-sidecar_terminator")
	build := exec.CommandContext(ctx, "go", "build", "-o", plugin, "./controller/cmd/kubectl-sidecar_terminator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the kubectl plugin: %v\n%s", err, out)
	}
	kb, err := cluster.KubernetesBinaries(ctx, cluster.Kubectl)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{"kubectl": kb[cluster.Kubectl], "kubectl-sidecar_terminator": plugin}
	for _, c := range cmds {
		c = strings.ReplaceAll(c, "NAMESPACE POD", pod.Namespace+" "+pod.Name)
		out, err := asReader(ctx, t, root, kubeconfig, tools, c)
		if err != nil {
			t.Errorf("NOTES command `%s`: %v\n%s", c, err, out)
			continue
		}
		t.Logf("NOTES command `%s`:\n%s", c, out)
		var want []string
		switch {
		case strings.Contains(c, "rollout status"):
			want = []string{"successfully rolled out"}
		case strings.Contains(c, " exec deploy/"):
			want = []string{pod.Name, "from the controller process in this container", "Events from sidecar-terminator", "SidecarTerminating"}
		default: // kubectl sidecar-terminator explain: the plugin
			want = []string{pod.Name, "from Deployment " + deploy.Namespace + "/" + deploy.ReleaseName, "Events from sidecar-terminator", "SidecarTerminating"}
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("`%s` output lacks %q", c, w)
			}
		}
	}
}

// notesCommands returns the command lines of the NOTES section of helm's
// output: the indented lines that start with kubectl or sidecar-terminator.
func notesCommands(helmOut string) []string {
	_, notes, ok := strings.Cut(helmOut, "NOTES:")
	if !ok {
		return nil
	}
	var cmds []string
	for _, l := range strings.Split(notes, "\n") {
		if !strings.HasPrefix(l, "  ") {
			continue
		}
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "kubectl ") || strings.HasPrefix(l, "sidecar-terminator ") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}
