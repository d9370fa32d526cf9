package bench

import (
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// The burst's pods must read as a Job's pods, as real ones do, or the
// controller's column pays a live read per CRR that no real Job pod costs.
func TestBurstPodsAreJobPods(t *testing.T) {
	for _, virtual := range []bool{false, true} {
		p := jobPod("r1", 7, virtual)
		p.Name = p.GenerateName + "x7k2p" // as the API server names it
		if !decision.JobOwned(p) {
			t.Errorf("virtual=%v: bench pod %s/%s does not read as a Job's pod: %+v", virtual, p.Namespace, p.Name, p.OwnerReferences)
		}
	}
}
