package toolbin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

// Every tool toolbin knows has its own module under hack/tools, pinning it
// with a tool directive for the package toolbin builds.
func TestEveryToolHasItsPinnedModule(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	for name, pkg := range Packages {
		data, err := os.ReadFile(filepath.Join(root, "hack", "tools", name, "go.mod"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !strings.Contains(string(data), "\ntool "+pkg+"\n") {
			t.Errorf("hack/tools/%s/go.mod has no `tool %s`", name, pkg)
		}
	}
}

func TestUnknownToolIsAnError(t *testing.T) {
	if _, err := Path(context.Background(), "no-such-tool"); err == nil {
		t.Error("Path of an unknown tool succeeded")
	}
}

// A second call finds the cached binary without building: what makes the
// chart tests cheap after the first run.
func TestPathIsCachedByVersion(t *testing.T) {
	t.Setenv("SIDECAR_TERMINATOR_CACHE", t.TempDir())
	ctx := context.Background()
	first, err := Path(ctx, "actionlint")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(first), "actionlint-v") {
		t.Errorf("binary %s not named by version", first)
	}
	st, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Path(ctx, "actionlint")
	if err != nil || second != first {
		t.Fatalf("second call: %s, %v; want %s", second, err, first)
	}
	st2, _ := os.Stat(second)
	if !st2.ModTime().Equal(st.ModTime()) {
		t.Error("binary rebuilt on the second call")
	}
}
