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

// readmeInstallCommand returns the README's command that installs the
// controller with the chart's defaults: the first `helm install
// sidecar-terminator` of "Install on a cluster", continuation lines joined,
// exactly as a reader copies it.
func readmeInstallCommand(t *testing.T, root string) string {
	t.Helper()
	section, err := readme.Section(root, "## Install on a cluster")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range readme.ShellCommands(section) {
		if strings.HasPrefix(line, "helm install sidecar-terminator ") {
			return line
		}
	}
	t.Fatal("no `helm install sidecar-terminator` command in the README's install section")
	return ""
}

// runReadmeInstall runs the README's install command with bash in the
// repository root, as a reader would, with the pinned helm first on PATH
// under the name the README uses.
func runReadmeInstall(ctx context.Context, t *testing.T, root, helm, kubeconfig string) (string, []byte, error) {
	t.Helper()
	cmdline := readmeInstallCommand(t, root)
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

func TestReadmeInstallCommandIsFound(t *testing.T) {
	e := newTestEnv(t, time.Minute)
	cmd := readmeInstallCommand(t, e.root)
	for _, want := range []string{"controller/deploy/chart/sidecar-terminator", "--namespace " + deploy.Namespace, "--create-namespace"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("README install command %q lacks %q", cmd, want)
		}
	}
}
