package app

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// slowSink stands in for an API server under a burst: each write takes a while.
type slowSink struct {
	delay time.Duration
	mu    sync.Mutex
	pods  map[string]int
}

func (s *slowSink) Create(e *corev1.Event) (*corev1.Event, error) {
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[e.InvolvedObject.Name]++
	return e, nil
}
func (s *slowSink) Update(e *corev1.Event) (*corev1.Event, error) { return e, nil }
func (s *slowSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return e, nil
}

// A burst of actions, each with its event, faster than one writer can write
// them: every pod still gets its event, and shutdown waits for the last.
func TestEventsOfABurstAreAllWritten(t *testing.T) {
	const pods = 4000 // one broadcaster queues 2,000 at most and drops the rest
	sink := &slowSink{delay: 2 * time.Millisecond, pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: "test"}, eventShards)
	recordEvents(ev, pods)
	ev.shutdown(time.Minute)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.pods) != pods {
		t.Fatalf("%d of %d pods got their event", len(sink.pods), pods)
	}
	for name, n := range sink.pods {
		if n != 1 {
			t.Fatalf("pod %s got %d events, want 1", name, n)
		}
	}
}

// recordEvents records one event for each of n pods. It keeps at most a
// few hundred in the broadcasters at a time, as a controller's syncs do: a
// broadcaster drops what it cannot queue (a thousand), and a tight loop on
// a loaded machine outran the eight of them before the sink was reached.
func recordEvents(ev *events, n int) {
	for i := range n {
		for i%100 == 0 && ev.recorded.Load()-ev.sink.taken.Load() > 400 {
			time.Sleep(time.Millisecond)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		ev.Event(pod, corev1.EventTypeNormal, "SidecarTerminating", "stopping")
	}
}

func (s *slowSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pods)
}

// While pods are queued the events wait, and follow once the queue empties.
func TestEventsGiveWayWhileSyncsAreQueued(t *testing.T) {
	sink := &slowSink{pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: "test"}, eventShards)
	var busy atomic.Bool
	busy.Store(true)
	ev.deferWhile(busy.Load)
	recordEvents(ev, 20)
	time.Sleep(300 * time.Millisecond)
	if n := sink.count(); n != 0 {
		t.Fatalf("%d events written while syncs were queued", n)
	}
	busy.Store(false)
	ev.shutdown(10 * time.Second)
	if n := sink.count(); n != 20 {
		t.Fatalf("%d of 20 events written once the queue emptied", n)
	}
}

// A queue that never empties delays events by maxDefer, no more.
func TestEventsWaitAtMostMaxDefer(t *testing.T) {
	sink := &slowSink{pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: "test"}, eventShards)
	ev.sink.maxDefer = 200 * time.Millisecond
	ev.deferWhile(func() bool { return true })
	defer ev.shutdown(time.Second)
	start := time.Now()
	recordEvents(ev, 20)
	for sink.count() < 20 && time.Since(start) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if n := sink.count(); n != 20 {
		t.Fatalf("%d of 20 events written", n)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("events took %s to write, want about maxDefer (200ms)", took)
	}
}

// A controller stopping with pods still queued writes its events at once.
func TestShutdownWritesDeferredEvents(t *testing.T) {
	sink := &slowSink{pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: "test"}, eventShards)
	ev.deferWhile(func() bool { return true })
	recordEvents(ev, 20)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	ev.shutdown(5 * time.Second)
	if n := sink.count(); n != 20 {
		t.Fatalf("%d of 20 events written on shutdown", n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("shutdown took %s: deferred events waited for the queue", took)
	}
}

func TestLastWriteNotesEachWrite(t *testing.T) {
	now := time.Unix(1000, 0)
	w := &lastWrite{Writer: podtest.NopWriter{}, now: func() time.Time { return now }}
	if n := w.recent(); n != 0 {
		t.Fatalf("no write yet, but recent() = %d", n)
	}
	ctx := context.Background()
	writes := map[string]func() error{
		"CreateCRR":      func() error { return w.CreateCRR(ctx, nil, false) },
		"DeleteCRR":      func() error { return w.DeleteCRR(ctx, "ns", "crr") },
		"PatchPod":       func() error { return w.PatchPod(ctx, "ns", "p", nil) },
		"PatchPodStatus": func() error { return w.PatchPodStatus(ctx, "ns", "p", nil) },
		"AnnotatePod":    func() error { return w.AnnotatePod(ctx, "ns", "p", "uid", "k", "v") },
	}
	for name, write := range writes {
		before := w.recent()
		if err := write(); err != nil {
			t.Fatal(err)
		}
		if got := w.recent(); got != before+1 {
			t.Errorf("%s not noted: recent() %d -> %d", name, before, got)
		}
	}
}

func TestLastWriteBurstIsARateNotOneWrite(t *testing.T) {
	now := time.Unix(1000, 0)
	w := &lastWrite{Writer: podtest.NopWriter{}, now: func() time.Time { return now }}
	ctx := context.Background()
	// A few Jobs finishing together: not a burst, their events go at once.
	for range burstWrites - 1 {
		_ = w.PatchPod(ctx, "ns", "p", nil)
	}
	if w.bursting() {
		t.Fatalf("%d writes in a second counted as a burst", burstWrites-1)
	}
	_ = w.PatchPod(ctx, "ns", "p", nil)
	if !w.bursting() {
		t.Fatalf("%d writes in a second not counted as a burst", burstWrites)
	}
	// The next second still remembers the last one's writes.
	now = now.Add(time.Second)
	if !w.bursting() {
		t.Errorf("burst forgotten one second on: recent() = %d", w.recent())
	}
	_ = w.PatchPod(ctx, "ns", "p", nil)
	if got := w.recent(); got != burstWrites+1 {
		t.Errorf("recent() = %d across two seconds, want %d", got, burstWrites+1)
	}
	// Two seconds of quiet end it.
	now = now.Add(2 * time.Second)
	if w.bursting() || w.recent() != 0 {
		t.Errorf("burst not over after two quiet seconds: recent() = %d", w.recent())
	}
}

// A burst as large as the scale tier's (20,000 pods, each with its event),
// recorded while the controller is busy: the events wait, none is dropped,
// and they go once the burst is over.
func TestEventsOfALargeDeferredBurstAreAllWritten(t *testing.T) {
	const pods = 20000
	sink := &slowSink{pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: "test"}, eventShards)
	var busy atomic.Bool
	busy.Store(true)
	ev.deferWhile(busy.Load)
	recordEvents(ev, pods)
	time.Sleep(200 * time.Millisecond)
	if n := sink.count(); n != 0 {
		t.Fatalf("%d events written while the controller was busy", n)
	}
	busy.Store(false)
	ev.shutdown(time.Minute)
	if n := sink.count(); n != pods {
		t.Fatalf("%d of %d pods got their event", n, pods)
	}
}

// flakySink fails its first creates as an unreachable API server would
// (not an answer of the server), then writes.
type flakySink struct {
	slowSink
	failures atomic.Int32
}

func (s *flakySink) Create(e *corev1.Event) (*corev1.Event, error) {
	if s.failures.Add(-1) >= 0 {
		return nil, fmt.Errorf("connection refused")
	}
	return s.slowSink.Create(e)
}

// A write the API server never answered is tried again, as client-go's
// recorder does; the event is written once.
func TestEventWriteIsRetriedWhenTheServerIsAway(t *testing.T) {
	sink := &flakySink{slowSink: slowSink{pods: map[string]int{}}}
	sink.failures.Store(2)
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: "test"}, eventShards)
	ev.sink.retryWait = 10 * time.Millisecond
	recordEvents(ev, 1)
	ev.shutdown(10 * time.Second)
	if n := sink.count(); n != 1 {
		t.Fatalf("%d of 1 events written after two failed tries", n)
	}
	if left := sink.failures.Load(); left > -1 {
		t.Errorf("the event was tried %d times, want 3", 2-left)
	}
}

// What the event correlators remember of a burst is bounded as client-go
// bounds one broadcaster's (4,096 objects), not once per shard: with eight
// full caches, a 20,000-pod burst's events kept 23.5 MiB of heap alive
// after they were written; with the shared bound, 8.4 MiB.
func TestEventCorrelatorsRememberABoundedNumberOfPods(t *testing.T) {
	const pods = 20000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sink := &slowSink{pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: "test"}, eventShards)
	recordEvents(ev, pods)
	for start := time.Now(); sink.count() < pods && time.Since(start) < time.Minute; {
		time.Sleep(10 * time.Millisecond)
	}
	if n := sink.count(); n != pods {
		t.Fatalf("%d of %d events written", n, pods)
	}
	sink.mu.Lock()
	sink.pods = nil // the test's own record of them
	sink.mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapInuse) - int64(before.HeapInuse)
	if kept > 16<<20 {
		t.Errorf("%.1f MiB of heap kept after %d events were written, want at most 16 MiB", float64(kept)/(1<<20), pods)
	}
	runtime.KeepAlive(ev)
}
