package bench

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

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

// In a side-by-side burst each terminator gets half the pods, half of its
// half on the normal node (CRR) and half on the virtual ones (image swap);
// the controller's decision finds a sidecar only in its own half.
func TestASideBySideBurstGivesEachTerminatorHalfOfEachKind(t *testing.T) {
	type kinds struct{ normal, virtual int }
	got := map[string]*kinds{controllerTerminator: {}, yardstickTerminator: {}}
	for i := range 400 {
		p := sideBySidePod("both1", i)
		owner := p.Labels[terminatorLabel]
		k, ok := got[owner]
		if !ok {
			t.Fatalf("pod %d labelled for %q", i, owner)
		}
		if p.Spec.NodeName == NormalNode {
			k.normal++
		} else {
			k.virtual++
		}
		containers, _ := decision.Classify(p, decision.DefaultPolicy())
		sidecars := 0
		for _, c := range containers {
			if c.Role == decision.RoleSidecar {
				sidecars++
			}
		}
		if want := map[string]int{controllerTerminator: 1, yardstickTerminator: 0}[owner]; sidecars != want {
			t.Errorf("pod %d (%s's): the controller finds %d sidecars, want %d", i, owner, sidecars, want)
		}
		if (owner == controllerTerminator) != (ownerOf(i, 2) == 0) {
			t.Errorf("pod %d labelled for %s, but ownerOf says %d", i, owner, ownerOf(i, 2))
		}
	}
	for owner, k := range got {
		if k.normal != 100 || k.virtual != 100 {
			t.Errorf("%s: %d on the normal node, %d on virtual ones; want 100 and 100", owner, k.normal, k.virtual)
		}
	}
}

// The yardstick acts on its own pods and on unlabelled ones (a burst of its
// own), never on the controller's half of a shared burst.
func TestTheYardstickLeavesTheControllersHalfAlone(t *testing.T) {
	now := time.Now()
	finished := func(p *corev1.Pod) *corev1.Pod {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: terminated(now)}, {Name: "sidecar", State: running(now)}}
		return p
	}
	controllers, yardsticks := finished(sideBySidePod("both1", 0)), finished(sideBySidePod("both1", 2))
	alone := finished(jobPod("yard1", 0, false))
	stillRunning := sideBySidePod("both1", 2)
	stillRunning.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: running(now)}, {Name: "sidecar", State: running(now)}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"the controller's half":        {controllers, false},
		"the yardstick's half":         {yardsticks, true},
		"a burst of its own":           {alone, true},
		"its own, the main still runs": {stillRunning, false},
	} {
		if got := yardstickTakes(tc.pod); got != tc.want {
			t.Errorf("%s: yardstickTakes %v, want %v", name, got, tc.want)
		}
	}
}
