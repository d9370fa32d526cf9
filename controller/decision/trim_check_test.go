//go:build !mutate

package decision_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
)

// sameAfterTrim holds every table row to the informer's trim: the controller
// decides on the pod as a read of its cache returns it (kube.TrimPod, then
// encoded and decoded: kube.AsCached), so Decide must give the same plan on
// that pod as on the full one. A field the
// decision reads and the trim drops fails the row that reads it. (An external
// test package: the decision itself never imports kube.)
func sameAfterTrim(t *testing.T, in Input, full Plan) {
	t.Helper()
	cached, err := kube.AsCached(in.Pod.DeepCopy())
	if err != nil {
		t.Fatalf("trim: %v", err)
	}
	in.Pod = cached
	if diff := cmp.Diff(full, Decide(in)); diff != "" {
		t.Errorf("the trim changes the plan (-full +trimmed):\n%s", diff)
	}
}
