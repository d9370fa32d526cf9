package reconciler

import (
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// podShows reads a swap's containers by index: an index the pod does not
// have (a pod not the one the swap was decided on) is "not shown", never a
// panic of the sync.
func TestPodShowsASwapOnlyWithinThePodsContainers(t *testing.T) {
	pod := podtest.Pod("p").Container("main").Container("log", podtest.Image("q:1")).Build()
	swap := func(index int) decision.Action {
		return decision.Action{Kind: decision.ActionSwapImage, Swaps: []decision.Swap{{Index: index, Container: "log", To: "q:1"}}}
	}
	if !podShows(pod, swap(1)) {
		t.Errorf("the swap to the image container 1 has is not shown")
	}
	if podShows(pod, swap(0)) {
		t.Errorf("a swap to an image container 0 does not have is shown")
	}
	for _, i := range []int{2, 3} {
		if podShows(pod, swap(i)) {
			t.Errorf("a swap of container index %d, which the pod does not have, is shown", i)
		}
	}
}
