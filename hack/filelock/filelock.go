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
	release, err := Acquire(ctx, path)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

// Acquire takes an exclusive flock on path, creating its directory, and
// returns the function that releases it. The lock also ends with the process.
func Acquire(ctx context.Context, path string) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	// flock blocks without honouring ctx; poll with LOCK_NB so a cancelled
	// test does not hang behind another process's long build.
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
