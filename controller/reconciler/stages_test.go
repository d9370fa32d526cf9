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
// the proxy's; with the delete refused (an RBAC without it), the proxy's CRR
// still goes, in the same sync, and waits behind the old one in kruise.
func TestNextStageDeletesTheEarlierCRR(t *testing.T) {
	for name, tc := range map[string]struct {
		deleteRefused bool
		want          []string
	}{
		"delete accepted": {want: []string{"delete ST1", "crr ST2"}},
		"delete refused":  {deleteRefused: true, want: []string{"delete ST1", "crr ST2"}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := podtest.Pod("p").Annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy").
				Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).
				Container("fluent-bit", markCRR, podtest.Exited(0, podtest.Epoch.Add(11*time.Second))).
				Container("istio-proxy", markCRR).Build()
			f := newFixture(pod)
			st1, st2 := decision.StageCRRName(pod, 1, 1), decision.StageCRRName(pod, 2, 1)
			f.w.crrs = []*kruisev1alpha1.ContainerRecreateRequest{stageCRR(st1, 1, "fluent-bit")}
			if tc.deleteRefused {
				f.w.answers["delete "+st1] = []error{apierrors.NewForbidden(schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}, st1, nil)}
			}
			f.sync(t)
			want := strings.NewReplacer("ST1", st1, "ST2", st2).Replace(strings.Join(tc.want, ","))
			if got := strings.Join(f.w.sent, ","); got != want {
				t.Fatalf("writes %s, want %s", got, want)
			}
		})
	}
}
