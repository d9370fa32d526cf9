package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// correctionWorld is world with an API server whose pod the test sets apart
// from the cache's.
type correctionWorld struct {
	*world
	livePod  *corev1.Pod
	liveErr  error
	podReads int
}

func (w *correctionWorld) LivePod(context.Context, string, string) (*corev1.Pod, error) {
	w.podReads++
	return w.livePod, w.liveErr
}

func (w *correctionWorld) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), name)
}

// A correction of a failed kill (the retry's CRR) is decided from the cache,
// which may lag: the sidecar it shows running may have stopped long ago. So
// the pod is read live first, and the correction is made only if the live
// pod still calls for it: the same version goes ahead; a newer one is
// decided again (the sidecar stopped: nothing to write); a pod gone or
// replaced is not written to; a failed read is an error. The happy path (no
// failed kill) reads nothing.
func TestACorrectionIsDecidedAgainOnTheLivePod(t *testing.T) {
	pod := donePod("p", "normal", markCRR)
	pod.ResourceVersion = "5"
	pod.Annotations = map[string]string{decision.AnnotationCRRAttempts: "1"}
	failed := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: decision.CRRName(pod, 1), CreationTimestamp: metav1.NewTime(podtest.Epoch),
			ResourceVersion: "3", Labels: map[string]string{reconciler.LabelPodUID: string(pod.UID), reconciler.LabelAttempt: "1"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{
			{Name: "log", StatusContext: &kruisev1alpha1.ContainerRecreateRequestContainerContext{RestartCount: 0}}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted,
			CompletionTime: &metav1.Time{Time: podtest.Epoch.Add(10 * time.Second)}},
	}
	stopped := pod.DeepCopy()
	stopped.ResourceVersion = "6"
	stopped.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137,
		FinishedAt: metav1.NewTime(podtest.Epoch.Add(12 * time.Second))}}
	replaced := pod.DeepCopy()
	replaced.UID, replaced.ResourceVersion = "p-uid-2", "7"
	retry := "crr " + decision.CRRName(pod, 2) + ",annotate " + decision.AnnotationCRRAttempts
	record := "annotate " + decision.AnnotationCRRAttempts
	for name, tc := range map[string]struct {
		live *corev1.Pod
		err  error
		// early: within the retry's backoff, when the correction is only
		// recording the failed attempt on the pod.
		early   bool
		writes  string
		fails   bool
		ignored bool
	}{
		"the live pod is the cache's":                 {live: pod, writes: retry},
		"the sidecar stopped since":                   {live: stopped},
		"the live pod is the cache's, in the backoff": {live: pod, early: true, writes: record},
		"the sidecar stopped since, in the backoff":   {live: stopped, early: true},
		"the pod is gone":                             {err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p"), ignored: true},
		"the pod was replaced":                        {live: replaced, ignored: true},
		"the read fails":                              {err: apierrors.NewInternalError(errors.New("etcd")), fails: true},
	} {
		t.Run(name, func(t *testing.T) {
			cached := pod
			if tc.early {
				cached = pod.DeepCopy()
				cached.Annotations = nil
			}
			f := newFixture(cached)
			live := tc.live
			if tc.early && live == pod {
				live = cached // the live pod is the cache's, as cached
			}
			w := &correctionWorld{world: f.w, livePod: live, liveErr: tc.err}
			f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, f.w, w, f.ev, f.metrics, f.clock)
			f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{failed}
			if !tc.early {
				f.clock.SetTime(podtest.Epoch.Add(10*time.Second + time.Minute))
			}
			_, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "p"})
			if tc.fails {
				if err == nil || !strings.Contains(err.Error(), "read live what the plan") {
					t.Fatalf("Sync: %v, want the failed live read", err)
				}
			} else if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if got := strings.Join(f.w.sent, ","); got != tc.writes {
				t.Errorf("writes %q, want %q", got, tc.writes)
			}
			if w.podReads != 1 {
				t.Errorf("live pod reads %d, want 1", w.podReads)
			}
			if got := testutil.ToFloat64(f.metrics.Decisions.WithLabelValues(string(decision.VerdictIgnored))); tc.ignored && got != 1 {
				t.Errorf("%v decisions %s, want 1", got, decision.VerdictIgnored)
			}
			if !tc.fails && !tc.ignored && decisions(f.metrics) != 1 {
				t.Errorf("%v decisions counted, want 1 with a verdict", decisions(f.metrics))
			}
		})
	}
	t.Run("no failed kill, no read", func(t *testing.T) {
		fresh := donePod("q", "normal", markCRR)
		f := newFixture(fresh)
		w := &correctionWorld{world: f.w, livePod: fresh}
		f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, f.w, w, f.ev, f.metrics, f.clock)
		f.sync(t)
		if w.podReads != 0 || strings.Join(f.w.sent, ",") != "crr "+decision.CRRName(fresh, 1) {
			t.Errorf("live pod reads %d, writes %v; want none and the first CRR", w.podReads, f.w.sent)
		}
	})
}

// A sidecar marked for both ways is stopped by CRR on a normal node and by
// the image swap on a node the virtual-node selector matches (no
// kruise-daemon there); with no selector configured, no node is virtual.
func TestVirtualNodeSelectorChoosesTheSwap(t *testing.T) {
	both := []podtest.Option{markCRR, markImage}
	for _, tc := range []struct {
		name     string
		node     string
		selector bool
		want     decision.ActionKind
	}{
		{"normal node", "normal", true, decision.ActionCreateCRR},
		{"virtual node", "vk", true, decision.ActionSwapImage},
		{"virtual node, no selector", "vk", false, decision.ActionCreateCRR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _, _ := newAPI(t, donePod("p", tc.node, both...))
			cfg := reconciler.DefaultConfig()
			if !tc.selector {
				cfg.VirtualNodeSelector = nil
			}
			rec := reconciler.New(cfg, a, a, a, a, nil, a.clock)
			plan, err := rec.Plan(a.cachedPods["p"], a.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Actions) != 1 || plan.Actions[0].Kind != tc.want {
				t.Errorf("plan %+v, want one %s", plan.Actions, tc.want)
			}
		})
	}
}
