package app

import (
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The reconciler finds its live reads by asking its Writer for them; the
// write counter the events give way to must not hide them, or the
// controller never reads a pod's Job (docs/job-verdict.md) nor confirms a
// write live.
func TestTheReconcilersWriterKeepsItsLiveReads(t *testing.T) {
	counter, w := newWriter(kube.Writer{})
	if _, ok := w.(reconciler.JobReader); !ok {
		t.Error("the reconciler's Writer is no reconciler.JobReader: the Job's podFailurePolicy would never be read")
	}
	if _, ok := w.(reconciler.LiveChecker); !ok {
		t.Error("the reconciler's Writer is no reconciler.LiveChecker: no write would be confirmed live")
	}
	if counter.recent() != 0 {
		t.Errorf("a new writer counts %d writes", counter.recent())
	}
}
