package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// The kustomize base is rendered from the chart; this fails when someone
// edits one without the other.
func TestKustomizeBaseIsUpToDate(t *testing.T) {
	root := repoRoot(t)
	want, err := RenderBase(context.Background(), helmBinary(t), root)
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Glob(filepath.Join(BaseDir(root), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range onDisk {
		names = append(names, filepath.Base(f))
	}
	var wantNames []string
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(names)
	sort.Strings(wantNames)
	if !equalStrings(names, wantNames) {
		t.Errorf("base has files %v, the chart renders %v: run make manifests", names, wantNames)
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(BaseDir(root), name))
		if err != nil {
			continue // reported above
		}
		if !bytes.Equal(got, data) {
			t.Errorf("base/%s is not what the chart renders: run make manifests", name)
		}
	}
}

// `kustomize build` of the base gives the objects a Helm release called
// sidecar-terminator in sidecar-terminator-system installs, less Helm's own
// labels, plus the namespace.
func TestKustomizeBuildEqualsHelmInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	kustomize, err := toolbin.Path(ctx, "kustomize")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build kustomize: %v", err)
		}
		t.Skipf("kustomize could not be built, base not checked: %v", err)
	}
	root := repoRoot(t)
	out, err := exec.Command(kustomize, "build", BaseDir(root)).CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize build: %v\n%s", err, out)
	}
	built, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	// helm install creates the test hook's Job only on `helm test`.
	chart, err := Template(ctx, helmBinary(t), ChartDir(root), Namespace, "--skip-tests")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{}
	for _, o := range chart {
		labels := o.GetLabels()
		for _, l := range helmOnlyLabels {
			delete(labels, l)
		}
		o.SetLabels(labels)
		want[o.GetKind()+"/"+o.GetName()] = o.Object
	}
	got := map[string]map[string]any{}
	for _, o := range built {
		if o.GetKind() == "Namespace" {
			if o.GetName() != Namespace || o.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("namespace %s labels %v, want %s enforcing restricted", o.GetName(), o.GetLabels(), Namespace)
			}
			continue
		}
		got[o.GetKind()+"/"+o.GetName()] = o.Object
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: in the chart, not in the base", k)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s differs between base and chart:\nchart %s\nbase  %s", k, toJSON(w), toJSON(g))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: in the base, not in the chart", k)
		}
	}
	// The admission policy ships in the base as well: kustomize users are
	// not left without it.
	for _, k := range []string{"ValidatingAdmissionPolicy/sidecar-terminator-serviceaccount", "ValidatingAdmissionPolicyBinding/sidecar-terminator-serviceaccount"} {
		if _, ok := got[k]; !ok {
			t.Errorf("the kustomize base lacks %s", k)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
