package app

import (
	"context"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// eventShards is how many of client-go's event broadcasters write at once.
// One broadcaster writes its events one at a time and drops what it cannot
// queue (1,000): in a burst of thousands of actions, each with its event,
// the events fell behind and were dropped. Every event of a pod goes through
// the same shard, so that shard's correlator still sees all of them (its
// aggregation and spam filter work per object).
const eventShards = 8

// maxEventDefer bounds how long an event waits for the controller's queue
// to empty before it is written anyway (see countingSink).
const maxEventDefer = 30 * time.Second

// events records through eventShards broadcasters into one sink, counting
// the events recorded and the calls made to write them, so that a stopping
// controller can wait for the ones still queued: an action whose event is
// lost on shutdown would be invisible, and the next leader, finding the work
// done, records none.
type events struct {
	sink         *countingSink
	broadcasters []record.EventBroadcaster
	recorders    []record.EventRecorder
	recorded     atomic.Int64
}

func newEvents(sink record.EventSink, scheme *runtime.Scheme, source corev1.EventSource, shards int) *events {
	e := &events{sink: &countingSink{EventSink: sink, maxDefer: maxEventDefer}}
	for range shards {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(e.sink)
		e.broadcasters = append(e.broadcasters, b)
		e.recorders = append(e.recorders, b.NewRecorder(scheme, source))
	}
	return e
}

// Event records on the shard of the object's UID.
func (e *events) Event(object runtime.Object, eventtype, reason, message string) {
	e.recorded.Add(1)
	shard := 0
	if m, err := meta.Accessor(object); err == nil {
		h := fnv.New32a()
		h.Write([]byte(m.GetUID()))
		shard = int(h.Sum32() % uint32(len(e.recorders)))
	}
	e.recorders[shard].Event(object, eventtype, reason, message)
}

// shutdown waits until every recorded event was written, or max passes (the
// correlator may drop spam, which is never written), then stops the
// broadcasters.
func (e *events) shutdown(max time.Duration) {
	// Keys may be left in the queue of a stopping controller: the events
	// of what it did go now.
	e.sink.busy.Store(nil)
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if e.sink.written.Load() >= e.recorded.Load() {
			break
		}
	}
	if left := e.recorded.Load() - e.sink.written.Load(); left > 0 {
		klog.Background().Info("Events not written before shutdown", "count", left)
	}
	for _, b := range e.broadcasters {
		b.Shutdown()
	}
}

// deferWhile makes events wait while busy reports a burst of work (at most
// maxEventDefer from when each was recorded).
func (e *events) deferWhile(busy func() bool) { e.sink.busy.Store(&busy) }

// countingSink counts the writes of events, and holds each back while the
// controller is busy (a long queue, or a burst of writes), up to
// maxEventDefer after it was recorded: in a burst the API server's time goes
// to the writes that stop sidecars first, and the events follow. An event waits on its shard's writer, not on the
// syncs, and one already older than maxEventDefer goes at once, so a long
// burst delays events by at most that much.
type countingSink struct {
	record.EventSink
	written  atomic.Int64
	busy     atomic.Pointer[func() bool]
	maxDefer time.Duration
}

func (s *countingSink) wait(e *corev1.Event) {
	recorded := e.LastTimestamp.Time
	for time.Since(recorded) < s.maxDefer {
		busy := s.busy.Load() // reloaded: shutdown ends every wait
		if busy == nil || !(*busy)() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.wait(e)
	defer s.written.Add(1)
	return s.EventSink.Create(e)
}

func (s *countingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.wait(e)
	defer s.written.Add(1)
	return s.EventSink.Update(e)
}

func (s *countingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.wait(e)
	defer s.written.Add(1)
	return s.EventSink.Patch(e, data)
}

// burstWrites is the write rate (per second) from which the controller is
// in a burst and its events give way to its writes. A few Jobs finishing
// together are not a burst: their events go at once, for whoever watches.
const burstWrites = 20

// lastWrite counts the controller's writes over the last second or two,
// for the events to give way to a burst of writes.
type lastWrite struct {
	reconciler.Writer
	now       func() time.Time // time.Now when nil
	mu        sync.Mutex
	sec       int64 // the Unix second cur counts
	cur, prev int
}

func (w *lastWrite) unix() int64 {
	if w.now != nil {
		return w.now().Unix()
	}
	return time.Now().Unix()
}

func (w *lastWrite) note() {
	s := w.unix()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch s {
	case w.sec:
		w.cur++
	case w.sec + 1:
		w.sec, w.prev, w.cur = s, w.cur, 1
	default:
		w.sec, w.prev, w.cur = s, 0, 1
	}
}

// recent is how many writes were made in this second and the one before.
func (w *lastWrite) recent() int {
	s := w.unix()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch s {
	case w.sec:
		return w.cur + w.prev
	case w.sec + 1:
		return w.cur
	}
	return 0
}

// bursting: the controller wrote at least burstWrites times in the last
// second or two.
func (w *lastWrite) bursting() bool { return w.recent() >= burstWrites }

func (w *lastWrite) CreateCRR(ctx context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, readPodFirst bool) error {
	w.note()
	return w.Writer.CreateCRR(ctx, crr, readPodFirst)
}

func (w *lastWrite) DeleteCRR(ctx context.Context, namespace, name string) error {
	w.note()
	return w.Writer.DeleteCRR(ctx, namespace, name)
}

func (w *lastWrite) PatchPod(ctx context.Context, namespace, name string, patch []byte) error {
	w.note()
	return w.Writer.PatchPod(ctx, namespace, name, patch)
}

func (w *lastWrite) PatchPodStatus(ctx context.Context, namespace, name string, patch []byte) error {
	w.note()
	return w.Writer.PatchPodStatus(ctx, namespace, name, patch)
}

func (w *lastWrite) AnnotatePod(ctx context.Context, namespace, name string, uid types.UID, key, value string) error {
	w.note()
	return w.Writer.AnnotatePod(ctx, namespace, name, uid, key, value)
}
