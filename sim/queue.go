package sim

import (
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Queue is client-go's rate-limited workqueue in virtual time: a key is
// queued once however often it is added, a key added while being processed
// is queued again when done, AddAfter keeps the earliest time, and failures
// back off per key as the controller's queue does (5 ms doubling to 30 s).
type Queue struct {
	s          *Sim
	onReady    func()
	fifo       []cache.ObjectName
	head       int
	queued     map[cache.ObjectName]bool
	processing map[cache.ObjectName]bool
	dirty      map[cache.ObjectName]bool
	waitUntil  map[cache.ObjectName]time.Time
	failures   map[cache.ObjectName]int
	shutdown   bool
}

func newQueue(s *Sim, onReady func()) *Queue {
	return &Queue{s: s, onReady: onReady, queued: map[cache.ObjectName]bool{}, processing: map[cache.ObjectName]bool{},
		dirty: map[cache.ObjectName]bool{}, waitUntil: map[cache.ObjectName]time.Time{}, failures: map[cache.ObjectName]int{}}
}

// Add queues the key now.
func (q *Queue) Add(k cache.ObjectName) {
	if q.shutdown {
		return
	}
	if q.processing[k] {
		q.dirty[k] = true
		return
	}
	if q.queued[k] {
		return
	}
	q.queued[k] = true
	q.fifo = append(q.fifo, k)
	q.onReady()
}

// AddAfter queues the key after d, unless it is already due earlier.
func (q *Queue) AddAfter(k cache.ObjectName, d time.Duration) {
	if d <= 0 {
		q.Add(k)
		return
	}
	at := q.s.now().Add(d)
	if w, ok := q.waitUntil[k]; ok && !w.After(at) {
		return
	}
	q.waitUntil[k] = at
	q.s.at(at, func() {
		if w, ok := q.waitUntil[k]; ok && w.Equal(at) {
			delete(q.waitUntil, k)
			q.Add(k)
		}
	})
}

// AddRateLimited queues the key after its back-off: the controller's, per
// pod, from reconciler.RetryBaseDelay doubling to RetryMaxDelay.
func (q *Queue) AddRateLimited(k cache.ObjectName) {
	n := q.failures[k]
	q.failures[k] = n + 1
	d := reconciler.RetryBaseDelay
	for i := 0; i < n && d < reconciler.RetryMaxDelay; i++ {
		d *= 2
	}
	q.AddAfter(k, min(d, reconciler.RetryMaxDelay))
}

func (q *Queue) Forget(k cache.ObjectName) { delete(q.failures, k) }

// Get pops the next key; ok is false when none is ready.
func (q *Queue) Get() (cache.ObjectName, bool) {
	if q.head >= len(q.fifo) {
		return cache.ObjectName{}, false
	}
	k := q.fifo[q.head]
	q.fifo[q.head] = cache.ObjectName{}
	q.head++
	if q.head > 1024 && q.head*2 > len(q.fifo) {
		q.fifo = append([]cache.ObjectName(nil), q.fifo[q.head:]...)
		q.head = 0
	}
	delete(q.queued, k)
	q.processing[k] = true
	return k, true
}

// Done ends processing of the key, queueing it again if it was added meanwhile.
func (q *Queue) Done(k cache.ObjectName) {
	delete(q.processing, k)
	if q.dirty[k] {
		delete(q.dirty, k)
		q.Add(k)
	}
}

func (q *Queue) Len() int { return len(q.fifo) - q.head }
