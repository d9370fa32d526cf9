package reconciler_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Only a CRR create answered AlreadyExists is work already done (an earlier
// run made it); an image patch answered AlreadyExists is not a swap that
// happened, and counts as a failed write.
func TestOnlyACRRCreateAnsweredAlreadyExistsIsDone(t *testing.T) {
	f := newFixture(jobPod(markImage))
	f.w.answers["swap"] = []error{apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, f.w.pod.Name)}
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionSwapImage), reconciler.ResultAlreadyDone)); got != 0 {
		t.Errorf("swap actions with result already-done = %v, want 0", got)
	}
	if got := testutil.ToFloat64(f.metrics.Actions.WithLabelValues(string(decision.ActionSwapImage), reconciler.ResultError)); got != 1 {
		t.Errorf("swap actions with result error = %v, want 1", got)
	}
}
