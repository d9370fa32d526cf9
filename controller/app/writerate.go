package app

import (
	"context"
	"sync"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

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
