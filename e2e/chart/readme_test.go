package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
)

var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// readmeInstallCommand returns the README's command that installs the
// controller with the chart's defaults: the first `helm install
// sidecar-terminator` of "Install on a cluster", continuation lines joined,
// exactly as a reader copies it.
func readmeInstallCommand(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "\n## Install on a cluster\n")
	if i < 0 {
		t.Fatal("README.md has no \"Install on a cluster\" section")
	}
	section := doc[i+1:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	for _, m := range shBlock.FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(strings.ReplaceAll(m[1], "\\\n", " "), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "helm install sidecar-terminator ") {
				return line
			}
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
	bin := t.TempDir()
	if err := os.Symlink(helm, filepath.Join(bin, "helm")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", cmdline)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return cmdline, out, err
}

// chartDefaultImage is the controller image the chart's default values
// name, from the chart rendered with them.
func chartDefaultImage(ctx context.Context, helm, root string) (string, error) {
	objs, err := deploy.Template(ctx, helm, deploy.ChartDir(root), deploy.Namespace)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) > 0 {
			if c, ok := containers[0].(map[string]any); ok {
				if image, ok := c["image"].(string); ok {
					return image, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no Deployment container image in the chart's default rendering")
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
