// Package filelock serialises builds across processes: two test binaries, or
// `make cluster-up` racing a suite, then build each cached binary once
// instead of both writing the same file.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// pollInterval is how often a waiter retries the lock.
const pollInterval = 100 * time.Millisecond

// With runs fn holding an exclusive flock on path, creating its directory.
func With(ctx context.Context, path string, fn func() error) error {
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
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it anyway
	return fn()
}
