package toolbin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A fresh machine: empty module cache, empty build cache, no tool cached.
// go writes "go: downloading ..." lines on its way, and they must stay out of
// the version, the cache path and the linker flags; the binary must run and
// report the version pinned in hack/tools/actionlint/go.mod (actionlint is
// the smallest of the tools to build). GOPROXY and GOFLAGS are inherited;
// -modcacherw leaves the module cache writable, so the test can remove it.
func TestBuildsOnAnEmptyModuleAndBuildCache(t *testing.T) {
	t.Setenv("SIDECAR_TERMINATOR_CACHE", t.TempDir())
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOCACHE", t.TempDir())
	t.Setenv("GOFLAGS", strings.TrimSpace(os.Getenv("GOFLAGS")+" -modcacherw"))
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "hack", "tools", "actionlint", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/rhysd/actionlint" {
			want = f[1]
		}
	}
	if want == "" {
		t.Fatal("hack/tools/actionlint/go.mod does not require github.com/rhysd/actionlint")
	}

	ctx := context.Background()
	start := time.Now()
	bin, err := Path(ctx, "actionlint")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built actionlint from empty caches in %s", time.Since(start).Round(time.Second))
	if filepath.Base(bin) != "actionlint-"+want {
		t.Errorf("binary %s, want actionlint-%s", bin, want)
	}
	out, err := exec.CommandContext(ctx, bin, "-version").Output()
	if err != nil {
		t.Fatalf("%s -version: %v", bin, err)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); strings.TrimSpace(first) != want {
		t.Errorf("%s -version first line %q, want %q", bin, first, want)
	}
}
