// Package release rehearses a release end to end on this machine (`make
// release-check`): a registry on 127.0.0.1 (hack/cmd/registry, a free
// port, stopped afterwards), the release command (hack/cmd/release, what
// the release workflow runs) with a cosign key made for the run, its
// verification from the registry alone, a second build of the same commit
// into a second registry giving the same digests, and then the local real
// cluster pulling what was pushed: its containerd trusts the registry, the
// chart is installed from oci://127.0.0.1:PORT/charts with only the
// registry overridden, the kubelet pulls the controller image, the
// Deployment becomes Available and a Job with a marked sidecar completes
// through it. Needs root, like e2e/chart.
//
//	go test ./e2e/release -count=1 -v
package release

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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

	// The release, then the same commit built and released again into a
	// second, empty registry.
	regA := startRegistry(ctx, t, registryBin)
	t1 := time.Now()
	first := publish(ctx, t, root, releaseBin, regA, filepath.Join(t.TempDir(), "a"))
	t.Logf("release into %s and its verification: %s", regA, time.Since(t1).Round(time.Millisecond))
	regB := startRegistry(ctx, t, registryBin)
	second := publish(ctx, t, root, releaseBin, regB, filepath.Join(t.TempDir(), "b"))
	for i, a := range first.Images {
		b := second.Images[i]
		t.Logf("digests %s: run 1 %s %v; run 2 %s %v", a.Name, a.Digest, a.Platforms, b.Digest, b.Platforms)
		if a.Digest != b.Digest || !mapsEqual(a.Platforms, b.Platforms) {
			t.Errorf("%s: two builds of the same commit differ: %s %v and %s %v", a.Name, a.Digest, a.Platforms, b.Digest, b.Platforms)
		}
	}
	if first.ChartDigest == second.ChartDigest {
		t.Logf("chart digest, both runs: %s", first.ChartDigest)
	} else {
		t.Logf("chart digests: run 1 %s, run 2 %s (helm package stamps the time)", first.ChartDigest, second.ChartDigest)
	}

	// The local cluster pulls from the first registry.
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
	untrust, err := c.Node.TrustRegistry(regA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := untrust(); err != nil {
			t.Errorf("remove the registry's host configuration: %v", err)
		}
	})
	ctl := first.Images[0]
	if present, err := c.Node.HasImage(ctx, ctl.Repository); err != nil || present {
		t.Fatalf("the node has %s before the install (present %v, %v): the pull would prove nothing", ctl.Repository, present, err)
	}

	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		t.Fatal(err)
	}
	// A user's install from the release: the chart from the registry, only
	// the registry overridden.
	t2 := time.Now()
	install := []string{"install", deploy.ReleaseName, first.Chart, "--version", version, "--plain-http",
		"--namespace", deploy.Namespace, "--create-namespace", "--set", "image.registry=" + regA}
	cmd := exec.CommandContext(ctx, helm, install...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(install, " "), err, out)
	}
	t.Logf("helm %s: %s", strings.Join(install, " "), time.Since(t2).Round(time.Millisecond))
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
	t.Logf("Deployment %s/%s Available %s after the install", deploy.Namespace, deploy.ReleaseName, time.Since(t2).Round(time.Millisecond))

	// The kubelet pulled the controller by the digest the chart pins, from
	// the registry.
	wantImage := ctl.Repository + "@" + ctl.Digest
	pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sidecar-terminator"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("controller pods: %v, %v", pods, err)
	}
	for _, p := range pods.Items {
		if got := p.Spec.Containers[0].Image; got != wantImage {
			t.Errorf("pod %s runs %s, want %s", p.Name, got, wantImage)
		}
	}
	evs, err := cs.CoreV1().Events(deploy.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pulled"})
	if err != nil {
		t.Fatal(err)
	}
	pulled := 0
	for _, ev := range evs.Items {
		if ev.Source.Component == "kubelet" && ev.Source.Host == c.Node.Name && strings.Contains(ev.Message, wantImage) {
			if strings.HasPrefix(ev.Message, "Successfully pulled") {
				pulled++
			}
			t.Logf("event %s %s/%s from %s on %s: %s", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Source.Component, ev.Source.Host, ev.Message)
		}
	}
	if pulled == 0 {
		t.Errorf("no kubelet event of a pull of %s on %s", wantImage, c.Node.Name)
	}
	if present, err := c.Node.HasImage(ctx, ctl.Repository); err != nil || !present {
		t.Errorf("the node's containerd lacks %s after the pull (present %v, %v)", ctl.Repository, present, err)
	}
	// A Job with a marked sidecar completes through the pulled controller.
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	obs := cases.InstalledControllerCompletesAJob(ctx, t, cases.Clients{Kube: cs, Dynamic: dyn}, "release-job", "e2e-release")
	if obs.Pod != nil {
		t.Logf("Job e2e-release/release-job Complete: pod %s %s", obs.Pod.Name, obs.Pod.Status.Phase)
	}
	t.Logf("release rehearsal wall time: %s", time.Since(start).Round(time.Second))
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
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
