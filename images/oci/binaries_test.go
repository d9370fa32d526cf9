package oci

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	cmd := exec.Command("go", "build", "-o", out, "./images/"+dir)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v: %s", dir, err, b)
	}
	return out
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return 0
}

// The quick-exit binary must exit 0 whatever name and args the sidecar's
// command gives it.
func TestQuickExitExitsZeroUnderAnyName(t *testing.T) {
	bin := buildBinary(t, "quick-exit")
	dir := t.TempDir()
	for _, name := range []string{"envoy", "sh", "fluent-bit"} {
		link := filepath.Join(dir, name)
		if err := os.Link(bin, link); err != nil {
			t.Fatal(err)
		}
		err := exec.Command(link, "-c", "/etc/envoy.yaml", "--drain-time-s", "45", "exit 3").Run()
		if c := exitCode(t, err); c != 0 {
			t.Errorf("%s exited %d, want 0", name, c)
		}
	}
}

func TestWorkloadModes(t *testing.T) {
	bin := buildBinary(t, "workload")
	if c := exitCode(t, exec.Command(bin, "main", "--seconds", "0.1", "--exit-code", "7").Run()); c != 7 {
		t.Errorf("main --exit-code 7 exited %d", c)
	}
	for arg, want := range map[string]int{"exit:0": 0, "exit:1": 1, "ignore": -1} {
		cmd := exec.Command(bin, "sidecar", "--on-sigterm", arg)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // let it install its handler
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if want < 0 {
				t.Errorf("sidecar --on-sigterm ignore exited on SIGTERM: %v", err)
			} else if c := exitCode(t, err); c != want {
				t.Errorf("sidecar --on-sigterm %s exited %d, want %d", arg, c, want)
			}
		case <-time.After(time.Second):
			if want >= 0 {
				t.Errorf("sidecar --on-sigterm %s still running 1s after SIGTERM", arg)
			}
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if c := exitCode(t, exec.Command(bin, "bogus").Run()); c != 2 {
		t.Errorf("bad argv exited %d, want 2", c)
	}
}
