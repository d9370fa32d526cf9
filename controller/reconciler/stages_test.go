package reconciler_test

import (
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// stageCRR is the CRR the controller made for a stop-order stage, as the
// cache shows it while kruise-daemon holds it Recreating.
func stageCRR(name string, stage int, containers ...string) *kruisev1alpha1.ContainerRecreateRequest {
	crr := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		CreationTimestamp: metav1.NewTime(podtest.Epoch.Add(10 * time.Second)),
		Labels:            map[string]string{reconciler.LabelAttempt: "1", reconciler.LabelStage: "1"}}}
	crr.Status.Phase = kruisev1alpha1.ContainerRecreateRequestRecreating
	for _, c := range containers {
		crr.Spec.Containers = append(crr.Spec.Containers, kruisev1alpha1.ContainerRecreateRequestContainer{Name: c})
	}
	return crr
}

// The shipper's stage is over (it exited) while its CRR stays Recreating, as
// under restartPolicy Never: the controller deletes that CRR, then creates
// the proxy's. A pod never has two of our CRRs in flight: kruise-daemon takes
// up one of a pod's CRRs at a time, and kruise-manager counts each one's
// deadline from its creation, so a CRR made beside the shipper's would spend
// its deadline waiting. With the delete refused for good (an RBAC without
// it; asked once more after the short backoff), the proxy's CRR waits for
// the shipper's deadline, when kruise-manager
// completes it; with the delete timed out, the delete is sent again after
// the backoff, then the proxy's CRR.
func TestNextStageDeletesTheEarlierCRR(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}, "x", nil)
	for name, tc := range map[string]struct {
		answer error
		// want are the writes of each sync; each sync after the first runs
		// when the one before asked to look again.
		want [][]string
	}{
		"delete accepted":         {want: [][]string{{"delete ST1", "crr ST2"}}},
		"delete refused for good": {answer: forbidden, want: [][]string{{"delete ST1"}, {"delete ST1"}, {"crr ST2"}}},
		"delete timed out":        {answer: apierrors.NewTimeoutError("slow", 1), want: [][]string{{"delete ST1"}, {"delete ST1", "crr ST2"}}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := shipperPod(podtest.Exited(0, podtest.Epoch.Add(11*time.Second))).Build()
			f := newFixture(pod)
			st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
			f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{stageCRR(st1, 1, "fluent-bit")}
			if tc.answer != nil {
				f.w.answers["delete "+st1] = []error{tc.answer}
				if tc.answer == forbidden { // for good: the confirming retry is refused too
					f.w.answers["delete "+st1] = []error{tc.answer, tc.answer}
				}
			}
			names := strings.NewReplacer("ST1", st1, "ST2", st2)
			var after time.Duration
			for i, want := range tc.want {
				if i > 0 {
					f.clock.Step(after)
				}
				f.w.sent = nil
				after = f.sync(t)
				if got, want := strings.Join(f.w.sent, ","), names.Replace(strings.Join(want, ",")); got != want {
					t.Fatalf("sync %d at %s: writes %s, want %s", i+1, f.clock.Now().Sub(podtest.Epoch), got, want)
				}
				if i < len(tc.want)-1 && after <= 0 {
					t.Fatalf("sync %d: nothing to look at again, with %s still to send", i+1, tc.want[i+1])
				}
			}
		})
	}
}

// shipperPod is a pod with a stop order (the shipper, fluent-bit, before the
// proxy, istio-proxy), both marked for a CRR, whose main exited at 10 s; the
// shipper's own state from opts.
func shipperPod(opts ...podtest.Option) *podtest.Builder {
	return podtest.Pod("p").Annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy").
		Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
		Container("fluent-bit", append([]podtest.Option{markCRR}, opts...)...).Container("istio-proxy", markCRR)
}

// A stage's CRR delete that got no answer may have been applied: it is
// remembered as deleted, so when the cache then drops the CRR the next stage
// goes on (its CRR, after the refusal's backoff), and the delete is not sent
// again for a CRR the pod no longer has.
func TestAStageDeleteWithoutAnswerCountsAsMaybeDone(t *testing.T) {
	pod := shipperPod(podtest.Exited(0, podtest.Epoch.Add(11*time.Second))).Build()
	f := newFixture(pod)
	st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
	f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{stageCRR(st1, 1, "fluent-bit")}
	f.w.answers["delete "+st1] = []error{apierrors.NewTimeoutError("no answer", 1)}
	f.clock.SetTime(podtest.Epoch.Add(50 * time.Second))
	after := f.sync(t)
	if got := strings.Join(f.w.sent, ","); got != "delete "+st1 {
		t.Fatalf("first sync: writes %s, want delete %s", got, st1)
	}
	// It was applied: the cache drops the CRR.
	f.w.crrs, f.w.sent = nil, nil
	f.clock.Step(after)
	f.sync(t)
	if got, want := strings.Join(f.w.sent, ","), "crr "+st2; got != want {
		t.Fatalf("after the backoff: writes %s, want %s", got, want)
	}
}
