package deploy

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// helmBinary returns the pinned helm, built on first use. A failed build
// skips the test on a developer's machine (the reason is printed) but fails
// it in CI, where the chart must always be checked.
func helmBinary(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build helm: %v", err)
		}
		t.Skipf("helm could not be built, chart not checked: %v", err)
	}
	return helm
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// render templates the chart in namespace "st-test" with extra helm args.
func render(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Template(context.Background(), helmBinary(t), ChartDir(repoRoot(t)), "st-test", args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// only returns the one object of kind, failing when there is not exactly one.
func only(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("rendered %d %s objects, want 1", len(found), kind)
	}
	return found[0]
}

func count(objs []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

// typed converts a rendered object into its API type, strictly, so that a
// misspelt field in a template fails the test rather than vanishing.
func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}
