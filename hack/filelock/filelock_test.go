package filelock

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithSerialisesHolders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := With(context.Background(), path, func() error {
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders at once, want 1", most.Load())
	}
}

func TestWithGivesUpWhenCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	held := make(chan struct{})
	release := make(chan struct{})
	go With(context.Background(), path, func() error { close(held); <-release; return nil })
	<-held
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := With(ctx, path, func() error { return nil }); err == nil {
		t.Fatal("got the lock another holder has")
	}
}
