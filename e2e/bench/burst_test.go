package bench

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestPacedExitsAreWrittenNoSoonerThanTheirTurn(t *testing.T) {
	const n, perSecond = 40, 200.0 // 0.2 s in all
	start := time.Now()
	var mu sync.Mutex
	at := make([]time.Time, n)
	if err := writeExits(context.Background(), n, start, perSecond, func(i int) error {
		mu.Lock()
		defer mu.Unlock()
		at[i] = time.Now()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, w := range at {
		if due := start.Add(time.Duration(float64(i) / perSecond * float64(time.Second))); w.Before(due) {
			t.Errorf("exit %d written %v before its turn", i, due.Sub(w))
		}
	}
}

func TestUnpacedExitsAreAllDueAtOnce(t *testing.T) {
	start := time.Now()
	for _, i := range []int{0, 1, 19999} {
		if due := exitDue(start, 0, i); !due.Equal(start) {
			t.Errorf("unpaced exit %d due %v after the first", i, due.Sub(start))
		}
	}
	if due := exitDue(start, 100, 250); due.Sub(start) != 2500*time.Millisecond {
		t.Errorf("the 250th exit at 100 a second is due %v after the first, want 2.5s", due.Sub(start))
	}
}

func TestAPacedWriteStopsWhenTheRunIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wrote := 0
	var mu sync.Mutex
	err := writeExits(ctx, 10, time.Now(), 0.001, func(int) error { // the second is due in 1,000 s
		mu.Lock()
		defer mu.Unlock()
		wrote++
		return nil
	})
	if err == nil || wrote != 1 {
		t.Errorf("cancelled paced writes: err %v, %d written; want the run's error and only the first", err, wrote)
	}
}
