package kruisesuite

// Fetching the Debian packages the two images are made of: apt-cache for
// the shared-library closure, apt-get download into the package cache.
// images.go packs them.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/hack/filelock"
)

// debArch is the image architecture: Debian's amd64 and arm64 are Go's
// names too.
func debArch(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "dpkg", "--print-architecture").Output()
	if err != nil {
		return "amd64"
	}
	return strings.TrimSpace(string(out))
}

// libraryClosure follows the Depends (first of each alternative) of pkg
// through shared-library packages, and returns them. Debian names those
// after the library's soname: lib*, and zlib1g from before that rule. The
// answer is kept beside the downloaded packages (apt-cache takes seconds).
func libraryClosure(ctx context.Context, debs, pkg string) ([]string, error) {
	saved := filepath.Join(debs, pkg+".libraries")
	if b, err := os.ReadFile(saved); err == nil {
		return strings.Fields(string(b)), nil
	}
	deps, err := dependsRecursive(ctx, pkg)
	if err != nil {
		return nil, err
	}
	libs := libraries(deps, pkg)
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(saved, []byte(strings.Join(libs, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return libs, nil
}

// libraries walks deps from pkg through shared-library packages only.
func libraries(deps map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	queue := []string{pkg}
	var libs []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, d := range deps[p] {
			if seen[d] || !(strings.HasPrefix(d, "lib") || d == "zlib1g") {
				continue
			}
			seen[d] = true
			libs = append(libs, d)
			queue = append(queue, d)
		}
	}
	sort.Strings(libs)
	return libs
}

// dependsRecursive reads, in one apt-cache call, the Depends and
// Pre-Depends of pkg and of everything they reach, taking the first of each
// set of alternatives.
func dependsRecursive(ctx context.Context, pkg string) (map[string][]string, error) {
	out, err := apt(ctx, "", "apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
		"--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", pkg)
	if err != nil {
		return nil, err
	}
	return parseDepends(string(out)), nil
}

// parseDepends reads `apt-cache depends --recurse` output: each package's
// Depends and Pre-Depends, the first of each set of alternatives, virtual
// packages (<name>) left out.
func parseDepends(out string) map[string][]string {
	deps := map[string][]string{}
	cur := ""
	alt := false // the previous line began a set of alternatives
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, " ") {
			cur, alt = strings.TrimSpace(l), false
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 || !strings.HasSuffix(f[0], "Depends:") {
			continue // an alternative's candidates, or another relation
		}
		if !alt && !strings.HasPrefix(f[1], "<") {
			deps[cur] = append(deps[cur], f[1])
		}
		alt = strings.HasPrefix(f[0], "|")
	}
	return deps
}

// apt runs an apt command in dir; if it fails (a machine whose package
// lists were never fetched knows no package), it runs `apt-get update` once
// and tries again.
func apt(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	run := func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
	out, err := run()
	if err == nil {
		return out, nil
	}
	if upd, uerr := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); uerr != nil {
		return nil, fmt.Errorf("%w; and apt-get update: %v: %s", err, uerr, upd)
	}
	return run()
}

// download fetches each package's candidate .deb with apt-get into dir
// (once: a .deb already there is used as it is) and returns their paths.
func download(ctx context.Context, dir string, pkgs []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	debs := func(p string) []string {
		f, _ := filepath.Glob(filepath.Join(dir, p+"_*.deb"))
		sort.Strings(f)
		return f
	}
	err := filelock.With(ctx, dir+".lock", func() error {
		var missing []string
		for _, p := range pkgs {
			if len(debs(p)) == 0 {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			if _, err := apt(ctx, dir, "apt-get", append([]string{"download", "-q"}, missing...)...); err != nil {
				return err
			}
		}
		for _, p := range pkgs {
			f := debs(p)
			if len(f) == 0 {
				return fmt.Errorf("apt-get download %s left no %s_*.deb in %s", p, p, dir)
			}
			files = append(files, f[len(f)-1])
		}
		return nil
	})
	return files, err
}
