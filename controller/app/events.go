package app

import (
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// flushingEvents counts the events recorded and the calls made to the API to
// write them, so that a stopping controller can wait for the ones still
// queued: an action whose event is lost on shutdown would be invisible, and
// the next leader, finding the work done, records none.
type flushingEvents struct {
	record.EventSink
	recorded, written atomic.Int64
}

// recorder wraps r so that every event is counted.
func (f *flushingEvents) recorder(r record.EventRecorder) countingRecorder {
	return countingRecorder{EventRecorder: r, count: &f.recorded}
}

func (f *flushingEvents) Create(e *corev1.Event) (*corev1.Event, error) {
	defer f.written.Add(1)
	return f.EventSink.Create(e)
}

func (f *flushingEvents) Update(e *corev1.Event) (*corev1.Event, error) {
	defer f.written.Add(1)
	return f.EventSink.Update(e)
}

func (f *flushingEvents) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	defer f.written.Add(1)
	return f.EventSink.Patch(e, data)
}

// wait returns once every recorded event was written, or after max: the
// correlator may drop spam, which is never written.
func (f *flushingEvents) wait(max time.Duration) {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if f.written.Load() >= f.recorded.Load() {
			return
		}
	}
}

type countingRecorder struct {
	record.EventRecorder
	count *atomic.Int64
}

func (c countingRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	c.count.Add(1)
	c.EventRecorder.Event(object, eventtype, reason, message)
}
