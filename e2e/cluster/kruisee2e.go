package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KruiseE2ETest is the file name of OpenKruise's own end-to-end test binary
// in the binary cache, beside kruise-manager and kruise-daemon.
const KruiseE2ETest = "kruise-e2e.test"

// KruiseE2ETestBinary builds (once per KruiseVersion) OpenKruise's own
// end-to-end suite, `go test -c ./test/e2e` of the github.com/openkruise/kruise
// module, in the same writable copy of the module that KruiseBinaries builds
// from (so the two share compiled packages), and returns its path. The
// binary reads the cluster from $KUBECONFIG and takes ginkgo's flags
// (-ginkgo.focus=...).
func KruiseE2ETestBinary(ctx context.Context) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "kruise-"+KruiseVersion)
	paths, err := ensureBinaries(ctx, dir, []string{KruiseE2ETest}, func(tmp string, _ []string) error {
		work, err := kruiseSourceCopy(ctx, dir)
		if err != nil {
			return err
		}
		return goTestCompile(ctx, work, filepath.Join(tmp, KruiseE2ETest), "./test/e2e")
	})
	if err != nil {
		return "", err
	}
	return paths[KruiseE2ETest], nil
}

// kruiseSourceCopy copies the kruise module from the module cache to
// <dir>.src, a writable dir at a fixed path (without -trimpath, Go's build
// cache keys the main module's packages on their directory), and returns
// it. The caller holds dir's build lock.
func kruiseSourceCopy(ctx context.Context, dir string) (string, error) {
	src, err := moduleDir(ctx, kruiseModule, KruiseVersion)
	if err != nil {
		return "", err
	}
	work := dir + ".src"
	if err := os.RemoveAll(work); err != nil {
		return "", fmt.Errorf("clean kruise source copy: %w", err)
	}
	if err := copyTree(src, work); err != nil {
		return "", fmt.Errorf("copy kruise module: %w", err)
	}
	return work, nil
}

// goTestCompile runs `go test -c -mod=mod -o out pkg` in dir.
func goTestCompile(ctx context.Context, dir, out, pkg string) error {
	args := []string{"test", "-c", "-mod=mod", "-o", out, pkg}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w: %s", strings.Join(args, " "), dir, err, tail(stderr.String(), 4000))
	}
	return nil
}
