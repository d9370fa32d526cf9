package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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

// withLock runs fn holding an exclusive flock on path. Two test binaries (or
// `make cluster-up` racing a suite) then build each binary once instead of
// both writing the same file.
func withLock(ctx context.Context, path string, fn func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open lock %s: %w", path, err)
	}
	defer f.Close()
	// flock blocks without honouring ctx; poll with LOCK_NB so a cancelled
	// test does not hang behind another process's long build.
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			return fmt.Errorf("lock %s: %w", path, err)
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			return fmt.Errorf("wait for lock %s: %w", path, err)
		}
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it anyway
	return fn()
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
	err := withLock(ctx, dir+".lock", func() error {
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
