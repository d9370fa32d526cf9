package app

import (
	"context"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// liveNop is a Writer that also reads live, and counts the reads.
type liveNop struct {
	podtest.NopWriter
	reads *int
}

func (l liveNop) LivePod(context.Context, string, string) (*corev1.Pod, error) {
	*l.reads++
	return &corev1.Pod{}, nil
}
func (l liveNop) LiveCRR(context.Context, string, string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	*l.reads++
	return &kruisev1alpha1.ContainerRecreateRequest{}, nil
}
func (l liveNop) LiveJob(context.Context, string, string) (*batchv1.Job, error) {
	*l.reads++
	return &batchv1.Job{}, nil
}

// The Writer the controller hands its reconciler counts writes for the
// events (lastWrite) and still reads live: the reconciler finds the live
// reads on its Writer, and a wrapper that hid them would leave every
// confirm of a plan, and the Job's podFailurePolicy, unread in the binary
// while every test of the reconciler, given a plain fake, passed.
func TestTheControllersWriterReadsLive(t *testing.T) {
	var w reconciler.Writer = &lastWrite{liveWriter: kube.Writer{Client: fake.NewClientset()}}
	if _, ok := w.(reconciler.LiveChecker); !ok {
		t.Error("the controller's Writer is no reconciler.LiveChecker: no plan's confirm would be read")
	}
	if _, ok := w.(reconciler.JobReader); !ok {
		t.Error("the controller's Writer is no reconciler.JobReader: no Job would be read")
	}
	reads := 0
	counted := &lastWrite{liveWriter: liveNop{reads: &reads}}
	ctx := context.Background()
	_, _ = counted.LivePod(ctx, "ns", "p")
	_, _ = counted.LiveCRR(ctx, "ns", "c")
	_, _ = counted.LiveJob(ctx, "ns", "j")
	if reads != 3 {
		t.Errorf("%d live reads reached the wrapped Writer, want 3", reads)
	}
	_ = counted.PatchPod(ctx, "ns", "p", nil)
	if counted.recent() != 1 {
		t.Errorf("a write through it not counted: recent() %d", counted.recent())
	}
}
