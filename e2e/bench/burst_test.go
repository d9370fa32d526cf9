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

// A shared burst's figures are each terminator's own: its pods' latencies,
// its pods not acted on, its pods in the timeline.
func TestASharedBurstIsSummarizedPerTerminator(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	b := &burst{
		owner:   map[string]int{"a0": 0, "a1": 0, "b0": 1, "b1": 1, "b2": 1},
		exitAt:  map[string]time.Time{"a0": at(0), "a1": at(1), "b0": at(0), "b1": at(1), "b2": at(2)},
		actAt:   map[string]time.Time{"a0": at(0.5), "a1": at(1.5), "b0": at(3), "b1": at(4)},
		doneAt:  map[string]time.Time{"a0": at(0.6), "a1": at(1.7), "b0": at(3.1), "b1": at(4.2)},
		deleted: map[string]bool{},
	}
	var a, bb BurstResult
	b.summarize(&a, start, 0)
	b.summarize(&bb, start, 1)
	if a.Max != 0.5 || a.NotActedOn != 0 || len(a.Latencies) != 2 {
		t.Errorf("owner 0: max %.2f, %d not acted on, %d latencies; want 0.50, 0, 2", a.Max, a.NotActedOn, len(a.Latencies))
	}
	if bb.Max != 3 || bb.NotActedOn != 1 || bb.FirstNotActedOn != "b2" || len(bb.Latencies) != 2 {
		t.Errorf("owner 1: max %.2f, %d not acted on (first %q), %d latencies; want 3.00, 1 (b2), 2", bb.Max, bb.NotActedOn, bb.FirstNotActedOn, len(bb.Latencies))
	}
	if a.AllSucceededSeconds != 1.7 {
		t.Errorf("owner 0: all succeeded after %.2fs, want 1.70 (owner 1's pods finish later)", a.AllSucceededSeconds)
	}
	count := func(r BurstResult) (exits, acted, done int) {
		for _, s := range r.timeline {
			exits, acted, done = exits+s.Exits, acted+s.Acted, done+s.Done
		}
		return
	}
	if e, ac, d := count(a); e != 2 || ac != 2 || d != 2 {
		t.Errorf("owner 0's timeline: %d exits, %d acted, %d done; want 2, 2, 2", e, ac, d)
	}
	if e, ac, d := count(bb); e != 3 || ac != 2 || d != 2 {
		t.Errorf("owner 1's timeline: %d exits, %d acted, %d done; want 3, 2, 2", e, ac, d)
	}
}
