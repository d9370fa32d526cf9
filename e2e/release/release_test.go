// Package release rehearses a release end to end on this machine and runs
// the README's install as written (`make release-check`, and `make test`):
// a registry on 127.0.0.1 (hack/cmd/registry, a free port, stopped
// afterwards) and the release command (hack/cmd/release, what the release
// workflow runs) with a cosign key made for the run, verified from the
// registry alone; then the README's `make push REGISTRY=...` into a second,
// empty registry, which must give the release's digests (a second build of
// the same commit); then the local real cluster runs the README's `helm
// install` and `helm test` against that registry: its containerd trusts the
// registry, the kubelet pulls the pushed controller by digest, the
// Deployment becomes Available, a Job with a marked sidecar completes, the
// chart's test Job passes, and the pushed kubectl plugin, fetched as
// INSTALL.md says, explains the Job's pod through kubectl. Needs root, like
// e2e/chart.
//
//	go test ./e2e/release -count=1 -v
package release

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	readmepkg "github.com/sidecar-terminator/sidecar-terminator/hack/readme"
	"github.com/sidecar-terminator/sidecar-terminator/hack/release"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// version is the rehearsed release's version.
const version = "0.1.0"

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

func TestReleaseIsPulledAndRunByTheCluster(t *testing.T) {
	skipUnlessHost(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	t.Cleanup(cancel)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	// The tools first, outside the steps' timings (cold, cosign and syft
	// are most of the run).
	for _, name := range []string{"crane", "cosign", "syft", "helm"} {
		t0 := time.Now()
		if _, err := toolbin.Path(ctx, name); err != nil {
			t.Fatalf("build %s: %v", name, err)
		}
		t.Logf("tool %s ready: %s", name, time.Since(t0).Round(time.Millisecond))
	}
	registryBin := goBuild(ctx, t, root, bins, "./hack/cmd/registry")
	releaseBin := goBuild(ctx, t, root, bins, "./hack/cmd/release")

	// The signed release, verified from the registry alone.
	regA := startRegistry(ctx, t, registryBin)
	t1 := time.Now()
	first := publish(ctx, t, root, releaseBin, regA, filepath.Join(t.TempDir(), "a"))
	t.Logf("release into %s and its verification: %s", regA, time.Since(t1).Round(time.Millisecond))

	// The README's install, as written, with REGISTRY a second, empty
	// registry: first `make push`, the same commit built again.
	readme := readmeInstall(t, root)
	regB := startRegistry(ctx, t, registryBin)
	push := readmeCommand(t, readme, "make push ", regB)
	t2 := time.Now()
	pushOut, err := asReader(ctx, t, root, "", nil, []string{"PUSH_OUT=" + t.TempDir()}, push)
	if err != nil {
		t.Fatalf("README `%s`: %v\n%s", push, err, pushOut)
	}
	t.Logf("README `%s`: %s\n%s", push, time.Since(t2).Round(time.Millisecond), pushOut)
	for _, a := range first.Images {
		want := fmt.Sprintf("%s/%s:%s@%s", regB, strings.TrimPrefix(a.Repository, regA+"/"), version, a.Digest)
		if !strings.Contains(string(pushOut), want) {
			t.Errorf("make push printed no %s: the same commit, built again, must give the release's digest", want)
		}
	}
	if !strings.Contains(string(pushOut), "oci://"+regB+"/charts/"+deploy.ReleaseName+" --version "+version) {
		t.Errorf("make push printed no chart reference")
	}

	// The local cluster pulls from the registry make push filled.
	c, err := cluster.Up(ctx, cluster.UpOptions{Logf: func(f string, a ...any) { t.Logf("harness: "+f, a...) }})
	if err != nil {
		t.Fatalf("bring the cluster up: %v", err)
	}
	t.Cleanup(func() {
		if dst := os.Getenv("E2E_LOGS_DIR"); dst != "" {
			if err := c.SaveLogs(filepath.Join(dst, "release")); err != nil {
				t.Logf("save logs: %v", err)
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("tear down (something may be left behind): %v", err)
		}
	})
	untrust, err := c.Node.TrustRegistry(regB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := untrust(); err != nil {
			t.Errorf("remove the registry's host configuration: %v", err)
		}
	})
	ctlRepo := regB + "/" + strings.TrimPrefix(first.Images[0].Repository, regA+"/")
	if present, err := c.Node.HasImage(ctx, ctlRepo); err != nil || present {
		t.Fatalf("the node has %s before the install (present %v, %v): the pull would prove nothing", ctlRepo, present, err)
	}
	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{"helm": helm}

	// The README's helm install (with --plain-http, as it says for a
	// registry served over HTTP), then its helm test.
	install := readmeCommand(t, readme, "helm install "+deploy.ReleaseName+" ", regB) + " --plain-http"
	t3 := time.Now()
	if out, err := asReader(ctx, t, root, c.Kubeconfig, tools, nil, install); err != nil {
		t.Fatalf("README `%s`: %v\n%s", install, err, out)
	}
	t.Logf("README `%s`: %s", install, time.Since(t3).Round(time.Millisecond))
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		dep, err := cs.AppsV1().Deployments(deploy.Namespace).Get(ctx, deploy.ReleaseName, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(dep.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
			return c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue
		}), nil
	}); err != nil {
		t.Fatalf("Deployment not Available 5 minutes after the install: %v", err)
	}
	t.Logf("Deployment %s/%s Available %s after the install", deploy.Namespace, deploy.ReleaseName, time.Since(t3).Round(time.Millisecond))

	// The kubelet pulled the controller by the digest the chart pins, from
	// the registry, with no --set: the digest the signed release has.
	wantImage := ctlRepo + "@" + first.Images[0].Digest
	pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sidecar-terminator"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("controller pods: %v, %v", pods, err)
	}
	for _, p := range pods.Items {
		if got := p.Spec.Containers[0].Image; got != wantImage {
			t.Errorf("pod %s runs %s, want %s", p.Name, got, wantImage)
		}
	}
	checkPulled(ctx, t, cs, c, wantImage)

	// A Job with a marked sidecar completes through the pulled controller.
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	obs := cases.InstalledControllerCompletesAJob(ctx, t, cases.Clients{Kube: cs, Dynamic: dyn}, "release-job", "e2e-release")
	if obs.Pod != nil {
		t.Logf("Job e2e-release/release-job Complete: pod %s %s", obs.Pod.Name, obs.Pod.Status.Phase)
	}

	// The README's helm test: the chart's test Job, on the pushed workload
	// and quick-exit images, completes through the controller.
	test := readmeCommand(t, readme, "helm test "+deploy.ReleaseName+" ", regB)
	t4 := time.Now()
	if out, err := asReader(ctx, t, root, c.Kubeconfig, tools, nil, test); err != nil {
		t.Errorf("README `%s`: %v\n%s", test, err, out)
	} else {
		t.Logf("README `%s`: %s\n%s", test, time.Since(t4).Round(time.Millisecond), out)
		if !strings.Contains(string(out), "Succeeded") {
			t.Errorf("helm test did not report the test Succeeded:\n%s", out)
		}
	}

	// The kubectl plugin, fetched from the registry as INSTALL.md says and
	// run through kubectl, explains the Job's pod.
	if obs.Pod != nil {
		pluginExplains(ctx, t, root, c.Kubeconfig, regB, obs.Pod)
	}
	t.Logf("release rehearsal and README install wall time: %s", time.Since(start).Round(time.Second))
}

// readmeInstall is the README's install block ("## Install on a cluster" up
// to its first subsection).
func readmeInstall(t *testing.T, root string) string {
	t.Helper()
	section, err := readmepkg.Section(root, "## Install on a cluster")
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(section, "\n### "); i >= 0 {
		section = section[:i]
	}
	return section
}

// readmeRegistry is the registry the README's commands name.
const readmeRegistry = "registry.example.com/team"

// readmeCommand returns the install block's command that starts with
// prefix, as a reader copies it, with the README's registry replaced by
// registry.
func readmeCommand(t *testing.T, block, prefix, registry string) string {
	t.Helper()
	for _, c := range readmepkg.ShellCommands(block) {
		if strings.HasPrefix(c, prefix) {
			if !strings.Contains(c, readmeRegistry) && !strings.HasPrefix(prefix, "helm test") {
				t.Fatalf("README `%s` does not name the registry %s", c, readmeRegistry)
			}
			return strings.ReplaceAll(c, readmeRegistry, registry)
		}
	}
	t.Fatalf("the README's install block has no command starting %q", prefix)
	return ""
}

// asReader runs a command line with bash in dir, as a reader would in a
// shell with KUBECONFIG set (when given), env added and the named tools
// (name: binary) first on PATH.
func asReader(ctx context.Context, t *testing.T, dir, kubeconfig string, tools map[string]string, env []string, cmdline string) ([]byte, error) {
	t.Helper()
	bin := t.TempDir()
	for name, target := range tools {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", cmdline)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd.CombinedOutput()
}

// checkPulled finds the kubelet's event of a pull of image on the node, and
// the image in its containerd.
func checkPulled(ctx context.Context, t *testing.T, cs kubernetes.Interface, c *cluster.Cluster, image string) {
	t.Helper()
	evs, err := cs.CoreV1().Events(deploy.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pulled"})
	if err != nil {
		t.Fatal(err)
	}
	pulled := 0
	for _, ev := range evs.Items {
		if ev.Source.Component == "kubelet" && ev.Source.Host == c.Node.Name && strings.Contains(ev.Message, image) {
			if strings.HasPrefix(ev.Message, "Successfully pulled") {
				pulled++
			}
			t.Logf("event %s %s/%s from %s on %s: %s", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Source.Component, ev.Source.Host, ev.Message)
		}
	}
	if pulled == 0 {
		t.Errorf("no kubelet event of a pull of %s on %s", image, c.Node.Name)
	}
	repo, _, _ := strings.Cut(image, "@")
	if present, err := c.Node.HasImage(ctx, repo); err != nil || !present {
		t.Errorf("the node's containerd lacks %s after the pull (present %v, %v)", repo, present, err)
	}
}

// pluginExplains fetches the kubectl plugin from the registry with the
// commands INSTALL.md gives (crane export | tar -x), for this host's
// architecture, puts it on PATH beside the cluster's kubectl, and runs
// `kubectl sidecar-terminator explain -n NS POD`.
func pluginExplains(ctx context.Context, t *testing.T, root, kubeconfig, registry string, pod *corev1.Pod) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "controller", "deploy", "INSTALL.md"))
	if err != nil {
		t.Fatal(err)
	}
	var fetch string
	for _, c := range readmepkg.ShellCommands(string(doc)) {
		if strings.HasPrefix(c, "crane export ") {
			fetch = strings.ReplaceAll(c, readmeRegistry, registry)
			fetch = strings.Replace(fetch, "--platform linux/amd64", "--platform linux/"+runtime.GOARCH, 1)
		}
	}
	if fetch == "" {
		t.Fatal("INSTALL.md gives no `crane export` of the plugin")
	}
	crane, err := toolbin.Path(ctx, "crane")
	if err != nil {
		t.Fatal(err)
	}
	kb, err := cluster.KubernetesBinaries(ctx, cluster.Kubectl)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, err := asReader(ctx, t, dir, "", map[string]string{"crane": crane}, nil, fetch); err != nil {
		t.Fatalf("INSTALL.md `%s`: %v\n%s", fetch, err, out)
	}
	plugin := filepath.Join(dir, "kubectl-sidecar_terminator")
	if err := os.Chmod(plugin, 0o755); err != nil {
		t.Fatalf("the plugin was not fetched: %v", err)
	}
	explain := fmt.Sprintf("kubectl sidecar-terminator explain -n %s %s", pod.Namespace, pod.Name)
	out, err := asReader(ctx, t, dir, kubeconfig, map[string]string{"kubectl": kb[cluster.Kubectl], "kubectl-sidecar_terminator": plugin}, nil, explain)
	if err != nil {
		t.Fatalf("`%s`: %v\n%s", explain, err, out)
	}
	t.Logf("`%s`:\n%s", explain, out)
	for _, want := range []string{pod.Name, "from Deployment " + deploy.Namespace + "/" + deploy.ReleaseName, "Events from sidecar-terminator", "SidecarTerminating"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("`%s` output lacks %q", explain, want)
		}
	}
}

func goBuild(ctx context.Context, t *testing.T, root, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// startRegistry runs hack/cmd/registry on 127.0.0.1 and a free port, blobs
// in a temporary dir, and stops it (SIGTERM, by PID) when the test ends.
func startRegistry(ctx context.Context, t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-addr-file", addrFile, "-blobs", filepath.Join(dir, "blobs"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
	})
	var addr string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		return err == nil && addr != "", nil
	}); err != nil {
		t.Fatalf("registry did not write its address: %v", err)
	}
	t.Logf("registry on %s (pid %d)", addr, cmd.Process.Pid)
	return addr
}

// publish runs the release command against registry with a key made for
// the run and -verify, logs its lines, and returns what it pushed.
func publish(ctx context.Context, t *testing.T, root, bin, registry, out string) *release.Result {
	t.Helper()
	args := []string{"-registry", registry, "-chart-repo", registry + "/charts", "-version", version,
		"-sign", release.Key, "-key", filepath.Join(out, "key", "cosign.key"), "-out", out, "-verify"}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		t.Log(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("release %s: %v", strings.Join(args, " "), err)
	}
	var res release.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("release output: %v\n%s", err, stdout.String())
	}
	t.Logf("release into %s: %s", registry, time.Since(t0).Round(time.Millisecond))
	return &res
}
