package app

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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

// drainAndForget waits (at most a minute) until want events were written,
// fails if they were not, then drops the sink's own record of them, so that
// a heap measured next counts only what the controller keeps.
func (s *slowSink) drainAndForget(tb testing.TB, want int) {
	tb.Helper()
	for start := time.Now(); s.count() < want && time.Since(start) < time.Minute; {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.count(); n != want {
		tb.Fatalf("%d of %d events written", n, want)
	}
	s.mu.Lock()
	s.pods = nil
	s.mu.Unlock()
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

// What the event correlators remember of a burst is bounded for all shards
// together, not once per shard, and below client-go's default for one
// broadcaster: with eight caches of the default size (4,096 objects), a
// 20,000-pod burst's events kept 23.5 MiB of heap alive after they were
// written; with the default shared, 7.6 MiB; with a quarter of it, 3.2.
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
	if kept > 5<<20 {
		t.Errorf("%.1f MiB of heap kept after %d events were written, want at most 5 MiB", float64(kept)/(1<<20), pods)
	}
	t.Logf("%.1f MiB of heap kept after %d events were written", float64(kept)/(1<<20), pods)
	runtime.KeepAlive(ev)
}

// capturingSink keeps what it is given to write.
type capturingSink struct {
	mu      sync.Mutex
	created []*corev1.Event
	patched map[string][]byte
}

func (s *capturingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, e)
	return e, nil
}
func (s *capturingSink) Update(e *corev1.Event) (*corev1.Event, error) { return s.Create(e) }
func (s *capturingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patched[e.Name] = data
	return e, nil
}

// An event held back is written as it was recorded, every field of it, and
// a patch with its data.
func TestAHeldBackEventIsWrittenAsRecorded(t *testing.T) {
	sink := &capturingSink{patched: map[string][]byte{}}
	s := newCountingSink(sink, 2, time.Minute, 100)
	defer s.stop()
	var busy atomic.Bool
	busy.Store(true)
	check := busy.Load
	s.busy.Store(&check)
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	recorded := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "p1.18b2c", Namespace: "ns", Annotations: map[string]string{"a": "b"}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p1", UID: "uid-1", APIVersion: "v1", ResourceVersion: "42"},
		Reason:         "SidecarTerminating", Message: `stopping sidecars ["sidecar"] by ContainerRecreateRequest`,
		Source: corev1.EventSource{Component: eventSource, Host: "h"}, FirstTimestamp: at, LastTimestamp: at, Count: 2,
		Type: corev1.EventTypeNormal, EventTime: metav1.NewMicroTime(at.Time), Action: "Stop",
		Related: &corev1.ObjectReference{Kind: "ContainerRecreateRequest", Name: "crr"}, ReportingController: eventSource, ReportingInstance: "i",
	}
	if _, err := s.Create(recorded); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Patch(recorded, []byte(`{"count":2}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	busy.Store(false)
	for start := time.Now(); s.written.Load() < 2 && time.Since(start) < 10*time.Second; {
		time.Sleep(5 * time.Millisecond)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.created) != 1 {
		t.Fatalf("%d events created, want 1", len(sink.created))
	}
	if got := sink.created[0]; !apiequality.Semantic.DeepEqual(got, recorded) {
		t.Errorf("written event differs from the recorded one:\n%s", cmp.Diff(recorded, got))
	}
	if got := string(sink.patched[recorded.Name]); got != `{"count":2}` {
		t.Errorf("patch written with %q", got)
	}
}

// The events held back while the controller is busy cost the heap their
// encoding, not their decoded objects: held decoded, such an event kept 786
// bytes (15.6 MiB for the scale tier's 20,000-pod burst), encoded 483.
func TestHeldBackEventsAreKeptSmall(t *testing.T) {
	const pods = 5000
	sink := &slowSink{pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: eventSource}, eventShards)
	defer ev.shutdown(time.Second)
	var busy atomic.Bool
	busy.Store(true)
	ev.deferWhile(busy.Load)
	for i := range pods {
		for ev.recorded.Load()-ev.sink.taken.Load() > 400 {
			time.Sleep(time.Millisecond)
		}
		pod := podtest.Pod(fmt.Sprintf("batch-%05d-x7k2p", i)).Build()
		pod.UID = types.UID(fmt.Sprintf("6c1f2a3b-8d4e-4f5a-9b6c-%012d", i))
		ev.Event(pod, corev1.EventTypeNormal, "SidecarTerminating", `Stopping sidecar container(s) ["sidecar"] by ContainerRecreateRequest ctl1-x7k2p-sidecar-terminator-1`)
	}
	for ev.recorded.Load() > ev.sink.taken.Load() {
		time.Sleep(time.Millisecond)
	}
	held := liveHeap()
	busy.Store(false)
	sink.drainAndForget(t, pods)
	each := (float64(held) - float64(liveHeap())) / pods
	if each > 550 {
		t.Errorf("an event held back keeps %.0f bytes of heap, want at most 550", each)
	}
	t.Logf("%.0f bytes of heap per event held back", each)
}
