package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"

	"github.com/sidecar-terminator/sidecar-terminator/hack/readme"
)

// localInstallCommand returns the command INSTALL.md gives for this
// project's local cluster (`make cluster-up CLUSTER_UP_FLAGS=--chart-images`
// imports the controller under the chart's default tag): the `helm install
// sidecar-terminator` of the chart in the checkout, continuation lines
// joined, exactly as a reader copies it. (The README's own install, from a
// registry `make push` filled, runs in e2e/release.)
func localInstallCommand(t *testing.T, root string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "controller", "deploy", "INSTALL.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range readme.ShellCommands(string(doc)) {
		if strings.HasPrefix(line, "helm install sidecar-terminator controller/deploy/chart/sidecar-terminator ") {
			return line
		}
	}
	t.Fatal("INSTALL.md gives no `helm install sidecar-terminator` of the chart in the checkout")
	return ""
}

// runLocalInstall runs INSTALL.md's local-cluster install command with bash
// in the repository root, as a reader would, with the pinned helm first on
// PATH under the name the command uses.
func runLocalInstall(ctx context.Context, t *testing.T, root, helm, kubeconfig string) (string, []byte, error) {
	t.Helper()
	cmdline := localInstallCommand(t, root)
	out, err := asReader(ctx, t, root, kubeconfig, map[string]string{"helm": helm}, cmdline)
	return cmdline, out, err
}

// asReader runs a command line with bash in dir, as a reader would in a
// shell with KUBECONFIG set and the named tools (name: binary) first on PATH.
func asReader(ctx context.Context, t *testing.T, dir, kubeconfig string, tools map[string]string, cmdline string) ([]byte, error) {
	t.Helper()
	bin := t.TempDir()
	for name, target := range tools {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", cmdline)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return cmd.CombinedOutput()
}

func TestLocalInstallCommandIsFound(t *testing.T) {
	e := newTestEnv(t, time.Minute)
	cmd := localInstallCommand(t, e.root)
	for _, want := range []string{"controller/deploy/chart/sidecar-terminator", "--namespace " + deploy.Namespace, "--create-namespace"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("INSTALL.md's local install command %q lacks %q", cmd, want)
		}
	}
}
