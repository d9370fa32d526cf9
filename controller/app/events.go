package app

import (
	"errors"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// eventShards is how many of client-go's event broadcasters write at once.
// One broadcaster writes its events one at a time and drops what it cannot
// queue (1,000): in a burst of thousands of actions, each with its event,
// the events fell behind and were dropped. Every event of a pod goes through
// the same shard, so that shard's correlator still sees all of them (its
// aggregation and spam filter work per object).
const eventShards = 8

// maxEventDefer bounds how long an event waits for the controller's queue
// to empty before it is written anyway (see countingSink). It outlasts a
// burst: with 30 s, a 20,000-pod burst (three minutes of exits) wrote most of
// its 20,000 events during the burst, and the API server's time they took
// made each stop's write slower and the queue longer (e2e/bench, one round at
// 20,000 over 150,000: mean time queued 413 ms with 30 s, 129 ms with 5 min).
// docs/observability.md states it (TestTheEventBoundsAreTheDocumentedOnes).
const maxEventDefer = 5 * time.Minute

// maxPendingEvents bounds the events held back at once (all shards
// together), so that memory stays bounded whatever the burst: at about a
// kilobyte each, 64 MiB at most. Events wait at most maxEventDefer, so a
// burst holds back what it acts on in that time (all 20,000 pods' events in
// the scale tier's burst); only past this bound is an event dropped.
const maxPendingEvents = 64000

// correlatorCacheSize is how many objects the event correlators remember,
// all shards together: a quarter of client-go's default for one
// broadcaster (4,096), which kept 6.5 MiB of heap after a 20,000-pod
// burst's events (BenchmarkBurstHeapHeld). What they remember matters only
// to a pod with several events of one reason close together (they are
// counted on one event, not written new); a burst overruns either bound,
// and a quiet cluster has fewer pods with events than this.
const correlatorCacheSize = 1024

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
	e := &events{sink: newCountingSink(sink, shards, maxEventDefer, maxPendingEvents)}
	// The shards share one correlator bound between them rather than each
	// holding as much: each correlator remembers the last objects' events
	// three times over (aggregation, spam filter, the event it patches),
	// over a kilobyte an object, and eight caches of client-go's default
	// size kept 23.5 MiB of a 20,000-pod burst's events alive (38 MiB once
	// full). A pod has one event of each reason, so a forgotten pod is no
	// loss: its next event is written new, not patched.
	correlator := record.CorrelatorOptions{LRUCacheSize: max(correlatorCacheSize/shards, 1)}
	for range shards {
		b := record.NewBroadcaster(record.WithCorrelatorOptions(correlator))
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
		shard = shardOf(m.GetUID(), len(e.recorders))
	}
	e.recorders[shard].Event(object, eventtype, reason, message)
}

// shardOf is the shard of an object's events: the same for the recorder
// and for the sink's queue, so that one object's events are written in the
// order they were recorded.
func shardOf(uid types.UID, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(uid))
	return int(h.Sum32() % uint32(shards))
}

// shutdown waits until every recorded event was written, or max passes (the
// correlator may drop spam, which is never written), then stops the
// broadcasters and the sink's writers.
func (e *events) shutdown(max time.Duration) {
	// Keys may be left in the queue of a stopping controller: the events
	// of what it did go now.
	e.sink.busy.Store(nil)
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if e.sink.written.Load()+e.sink.dropped.Load() >= e.recorded.Load() {
			break
		}
	}
	if left := e.recorded.Load() - e.sink.written.Load(); left > 0 {
		klog.Background().Info("Events not written before shutdown", "count", left, "droppedOverBound", e.sink.dropped.Load())
	}
	for _, b := range e.broadcasters {
		b.Shutdown()
	}
	e.sink.stop()
}

// deferWhile makes events wait while busy reports a burst of work (at most
// maxEventDefer from when each was recorded).
func (e *events) deferWhile(busy func() bool) { e.sink.busy.Store(&busy) }

// countingSink takes the broadcasters' writes into queues of its own, one
// per shard, and writes them from there, counting the writes; it holds each
// back while the controller is busy (a long queue, or a burst of writes), up
// to maxDefer after it was recorded: in a burst the API server's time goes
// to the writes that stop sidecars first, and the events follow.
//
// The queues are its own because a broadcaster's are not enough: each
// broadcaster holds at most about a thousand events waiting for its sink,
// and drops the rest, so a sink that waited in its write lost all but 8,008
// of a 20,000-pod burst's events (TestEventsOfALargeDeferredBurstAreAllWritten).
// Taking an event returns at once; the queue's writer retries a failed write
// as client-go's recorder would (recordToSink), in the order the shard
// recorded them.
type countingSink struct {
	record.EventSink
	written  atomic.Int64
	taken    atomic.Int64 // into the queues, or dropped
	dropped  atomic.Int64 // over maxPending
	busy     atomic.Pointer[func() bool]
	maxDefer time.Duration
	// retryWait is how long a failed write waits before its next try
	// (client-go's recorder waits 10 s, with jitter).
	retryWait time.Duration
	queues    []*eventQueue
	done      chan struct{}
	stopOnce  sync.Once
}

// eventQueue is one shard's events waiting to be written.
type eventQueue struct {
	mu      sync.Mutex
	pending []pendingEvent
	max     int
	wake    chan struct{}
}

// pendingEvent is one write: a create, an update, or a patch (data set).
// The event waits encoded: decoded, it is a struct of about 600 bytes with
// a dozen strings of its own, and a burst's events wait together (15.6 MiB
// for the scale tier's 20,000, BenchmarkBurstHeapHeld); encoded, about 480
// bytes a waiting event instead of 790 (TestHeldBackEventsAreKeptSmall).
type pendingEvent struct {
	op eventOp
	// recorded is the event's lastTimestamp: how long it has waited.
	recorded time.Time
	wire     []byte // the event, protobuf-encoded
	data     []byte
}

type eventOp int

const (
	opCreate eventOp = iota
	opUpdate
	opPatch
)

// maxEventTries is how often a write is tried (client-go's recorder's
// maxTriesPerEvent).
const maxEventTries = 12

func newCountingSink(sink record.EventSink, shards int, maxDefer time.Duration, maxPending int) *countingSink {
	s := &countingSink{EventSink: sink, maxDefer: maxDefer, retryWait: 10 * time.Second, done: make(chan struct{})}
	for range shards {
		q := &eventQueue{max: max(maxPending/shards, 1), wake: make(chan struct{}, 1)}
		s.queues = append(s.queues, q)
		go s.write(q)
	}
	return s
}

func (s *countingSink) enqueue(op eventOp, e *corev1.Event, data []byte) {
	defer s.taken.Add(1)
	q := s.queues[shardOf(e.InvolvedObject.UID, len(s.queues))]
	wire, err := e.Marshal()
	if err != nil {
		s.dropped.Add(1)
		klog.Background().Info("Event dropped: it cannot be encoded", "object", klog.KRef(e.InvolvedObject.Namespace, e.InvolvedObject.Name), "reason", e.Reason, "err", err.Error())
		return
	}
	q.mu.Lock()
	if len(q.pending) >= q.max {
		q.mu.Unlock()
		s.dropped.Add(1)
		klog.Background().Info("Event dropped: too many events waiting to be written", "object", klog.KRef(e.InvolvedObject.Namespace, e.InvolvedObject.Name), "reason", e.Reason)
		return
	}
	q.pending = append(q.pending, pendingEvent{op: op, recorded: e.LastTimestamp.Time, wire: wire, data: data})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// write writes q's events in order until the sink stops.
func (s *countingSink) write(q *eventQueue) {
	for {
		q.mu.Lock()
		var p pendingEvent
		ok := len(q.pending) > 0
		if ok {
			p = q.pending[0]
			q.pending[0] = pendingEvent{}
			q.pending = q.pending[1:]
			if len(q.pending) == 0 {
				q.pending = nil // the drained backing array goes
			}
		}
		q.mu.Unlock()
		if !ok {
			select {
			case <-q.wake:
				continue
			case <-s.done:
				return
			}
		}
		s.wait(p.recorded)
		if e := (&corev1.Event{}); e.Unmarshal(p.wire) != nil {
			// Not reached: the bytes are the encoding of an event.
			klog.Background().Info("Event not written: its encoding does not decode")
		} else {
			s.send(p.op, e, p.data)
		}
		s.written.Add(1)
	}
}

// send writes one event, retrying what client-go's recorder retries: not
// an answer of the API server (it would answer the same again), but a
// failure to reach it. A patch of an event the API server no longer has
// becomes a create, as in the recorder.
func (s *countingSink) send(op eventOp, event *corev1.Event, data []byte) {
	for try := 1; ; try++ {
		var err error
		switch op {
		case opCreate:
			_, err = s.EventSink.Create(event)
		case opUpdate:
			_, err = s.EventSink.Update(event)
		case opPatch:
			_, err = s.EventSink.Patch(event, data)
			if apierrors.IsNotFound(err) {
				e := event.DeepCopy()
				e.ResourceVersion = ""
				_, err = s.EventSink.Create(e)
			}
		}
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) || try >= maxEventTries {
			if err != nil {
				klog.Background().Info("Event not written", "object", klog.KRef(event.InvolvedObject.Namespace, event.InvolvedObject.Name), "reason", event.Reason, "err", err.Error())
			}
			return
		}
		select {
		case <-time.After(wait.Jitter(s.retryWait, 0.25)):
		case <-s.done:
			return
		}
	}
}

func (s *countingSink) stop() { s.stopOnce.Do(func() { close(s.done) }) }

func (s *countingSink) wait(recorded time.Time) {
	for time.Since(recorded) < s.maxDefer {
		busy := s.busy.Load() // reloaded: shutdown ends every wait
		if busy == nil || !(*busy)() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Create, Update and Patch take the event into its shard's queue and
// return at once: the event as given, as kube.EventSink would (its answer
// is never decoded).
func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.enqueue(opCreate, e, nil)
	return e, nil
}

func (s *countingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.enqueue(opUpdate, e, nil)
	return e, nil
}

func (s *countingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.enqueue(opPatch, e, data)
	return e, nil
}
