package kind

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dockerdEnv gives kind/hack/dockerd.sh a namespace, run dir and data root of
// the test's own, so it never meets an engine a developer runs.
func dockerdEnv(t *testing.T) []string {
	name := fmt.Sprintf("st-kind-test-%d", os.Getpid())
	return append(os.Environ(),
		"KIND_NETNS="+name,
		"KIND_DOCKER_RUN=/run/"+name,
		"KIND_DOCKER_DATA="+t.TempDir(),
	)
}

func dockerd(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("hack/dockerd.sh", args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The engine kind runs on here: it starts in a network namespace of its own,
// runs a privileged container (what kind does with every node) through the
// runc wrapper, and on stop leaves no process, namespace, interface or
// iptables rule of its own behind (dockerd.sh stop compares the host with
// the snapshot start took and fails otherwise).
func TestDockerdInItsOwnNamespaceLeavesTheHostAsItWas(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no dockerd in CI: .ci/run runs kind/hack/install-deps.sh first")
		}
		t.Skip("no dockerd: kind/hack/install-deps.sh")
	}
	env := dockerdEnv(t)
	if out, err := dockerd(t, env, "start"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_, _ = dockerd(t, env, "stop")
		}
	})
	out, err := dockerd(t, env, "run", "/usr/bin/docker", "info", "--format", "{{.DefaultRuntime}}")
	if err != nil || strings.TrimSpace(out) != "nocap" {
		t.Fatalf("docker info: default runtime %q, %v", out, err)
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	if strings.Contains(string(links), "docker0") {
		t.Errorf("docker0 on the host:\n%s", links)
	}

	// A privileged container from an image of one static binary.
	img := filepath.Join(t.TempDir(), "pause.tar")
	buildPauseRoot(t, img)
	if out, err := dockerd(t, env, "run", "/usr/bin/docker", "import", "--change", `ENTRYPOINT ["/pause"]`, img, "st-test-pause:1"); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	out, err = dockerd(t, env, "run", "/usr/bin/docker", "run", "-d", "--privileged", "st-test-pause:1")
	if err != nil {
		t.Fatalf("docker run --privileged: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	out, err = dockerd(t, env, "run", "/usr/bin/docker", "inspect", "-f", "{{.State.Running}}", id)
	if err != nil || strings.TrimSpace(out) != "true" {
		t.Errorf("privileged container not running: %q %v", out, err)
	}
	if out, err := dockerd(t, env, "run", "/usr/bin/docker", "exec", "-d", "--privileged", id, "/pause"); err != nil {
		t.Errorf("docker exec --privileged: %v\n%s", err, out)
	}

	out, err = dockerd(t, env, "stop")
	stopped = true
	if err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if !strings.Contains(out, "host check") {
		t.Errorf("stop printed no host check:\n%s", out)
	}
	ns, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(ns), fmt.Sprintf("st-kind-test-%d", os.Getpid())) {
		t.Errorf("namespace left: %s", ns)
	}
	t.Log(out)
}

// buildPauseRoot writes a root file system tarball holding the project's
// pause binary, statically linked.
func buildPauseRoot(t *testing.T, out string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command("go", "build", "-o", bin, "../images/pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build pause: %v\n%s", err, b)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(data)
	_ = tw.Close()
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
