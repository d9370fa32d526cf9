package cluster

import (
	"github.com/sidecar-terminator/sidecar-terminator/hack/filelock"

	"context"
	"fmt"
	"os"
	"path/filepath"
)

// CacheDir is where built binaries live, outside the repository so that a
// fresh clone or `git clean` does not throw away minutes of compilation.
func CacheDir() (string, error) {
	if d := os.Getenv("SIDECAR_TERMINATOR_CACHE"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "sidecar-terminator"), nil
}

// ensureBinaries returns the paths of names under dir, calling build when any
// is missing. build receives a temporary directory inside dir and must leave
// each binary there under its name; they are then renamed into place, so a
// reader never sees a half-written binary.
func ensureBinaries(ctx context.Context, dir string, names []string, build func(tmp string, missing []string) error) (map[string]string, error) {
	paths := map[string]string{}
	missing := func() []string {
		var m []string
		for _, n := range names {
			p := filepath.Join(dir, n)
			paths[n] = p
			if _, err := os.Stat(p); err != nil {
				m = append(m, n)
			}
		}
		return m
	}
	if len(missing()) == 0 {
		return paths, nil
	}
	err := filelock.With(ctx, dir+".lock", func() error {
		m := missing() // another process may have built them while we waited
		if len(m) == 0 {
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		tmp, err := os.MkdirTemp(dir, ".build-")
		if err != nil {
			return fmt.Errorf("create build dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		if err := build(tmp, m); err != nil {
			return err
		}
		for _, n := range m {
			if err := os.Rename(filepath.Join(tmp, n), filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("install %s: %w", n, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return paths, nil
}
