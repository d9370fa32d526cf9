// Package kind holds the kind cluster configs and scripts (no Go code); this
// test checks what can be checked without Docker: the configs' shape and
// pinning, that the CI matrix points at existing configs, and that the
// charts the script installs render with the values it passes.
package kind

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

type kindConfig struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Nodes      []struct {
		Role  string `json:"role"`
		Image string `json:"image"`
	} `json:"nodes"`
	KubeadmConfigPatches []string `json:"kubeadmConfigPatches"`
}

var nodeImage = regexp.MustCompile(`^kindest/node:v1\.(\d+)\.\d+@sha256:[0-9a-f]{64}$`)

func TestClusterConfigs(t *testing.T) {
	files, err := filepath.Glob("clusters/v1.*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var minors []int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c kindConfig
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
			t.Errorf("%s: %s %s, want a kind Cluster v1alpha4", f, c.Kind, c.APIVersion)
		}
		roles := map[string]int{}
		fileMinor, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "v1."), ".yaml"))
		for _, n := range c.Nodes {
			roles[n.Role]++
			m := nodeImage.FindStringSubmatch(n.Image)
			if m == nil {
				t.Errorf("%s: node image %q not pinned as kindest/node:vX.Y.Z@sha256:...", f, n.Image)
				continue
			}
			if minor, _ := strconv.Atoi(m[1]); minor != fileMinor {
				t.Errorf("%s: node image %s is not Kubernetes 1.%d", f, n.Image, fileMinor)
			}
		}
		if roles["control-plane"] != 1 || roles["worker"] != 2 || len(c.Nodes) != 3 {
			t.Errorf("%s: roles %v, want one control-plane and two workers", f, roles)
		}
		minors = append(minors, fileMinor)
	}
	if len(minors) < 3 {
		t.Errorf("%d Kubernetes versions, want at least 3", len(minors))
	}
	// The kubelet from 1.35 on refuses cgroup v1 hosts unless told not to;
	// kind's own CI hosts and this project's are of both kinds.
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if !strings.Contains(string(data), "failCgroupV1: false") {
			t.Errorf("%s: no KubeletConfiguration failCgroupV1: false patch", f)
		}
	}
}

// The kind workflow's matrix must name only versions that have a config,
// and every config must be in the matrix.
func TestWorkflowMatrixMatchesConfigs(t *testing.T) {
	data, err := os.ReadFile("../.github/workflows/e2e-kind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix map[string]any `json:"matrix"`
			} `json:"strategy"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	var inMatrix []string
	for _, j := range wf.Jobs {
		if ks, ok := j.Strategy.Matrix["kubernetes"].([]any); ok {
			for _, k := range ks {
				inMatrix = append(inMatrix, k.(string))
			}
		}
	}
	files, _ := filepath.Glob("clusters/v1.*.yaml")
	want := map[string]bool{}
	for _, f := range files {
		want[strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "v"), ".yaml")] = true
	}
	got := map[string]bool{}
	for _, k := range inMatrix {
		got[k] = true
		if !want[k] {
			t.Errorf("matrix has %s, no kind/clusters/v%s.yaml", k, k)
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("kind/clusters/v%s.yaml is not in the e2e-kind matrix", k)
		}
	}
}

func helm(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	h, err := toolbin.Path(ctx, "helm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build helm: %v", err)
		}
		t.Skipf("helm could not be built: %v", err)
	}
	return h
}

// up.sh installs the product chart with kind/values.yaml and the mock node
// chart with its defaults: both must lint and render.
func TestChartsRenderWithKindValues(t *testing.T) {
	h := helm(t)
	for _, args := range [][]string{
		{"lint", "--strict", "../controller/deploy/chart/sidecar-terminator", "-f", "values.yaml"},
		{"lint", "--strict", "mock-node"},
	} {
		if out, err := exec.Command(h, args...).CombinedOutput(); err != nil {
			t.Errorf("helm %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command(h, "template", "sidecar-terminator", "../controller/deploy/chart/sidecar-terminator", "-f", "values.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	// kind load puts the images on the nodes; a pull would fail the run.
	for _, want := range []string{"image: \"ghcr.io/sidecar-terminator/controller:dev\"", "imagePullPolicy: Never"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
}

// Every pinned node image is cited in kind/README.md, which names the kind
// release that published them: the one hack/tools/kind pins (kind supports a
// node image only with its own release).
func TestNodeImagesCitedForThePinnedKind(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../hack/tools/kind/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/kind (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("hack/tools/kind/go.mod does not require sigs.k8s.io/kind")
	}
	kindVersion := string(m[1])
	if !strings.Contains(string(readme), "kind "+kindVersion+"'s release notes") {
		t.Errorf("kind/README.md does not cite kind %s's release notes for the node images", kindVersion)
	}
	files, _ := filepath.Glob("clusters/v1.*.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range regexp.MustCompile(`kindest/node:\S+`).FindAllString(string(data), -1) {
			if !strings.Contains(string(readme), "`"+img+"`") {
				t.Errorf("%s: %s is not cited in kind/README.md", f, img)
			}
		}
	}
}
