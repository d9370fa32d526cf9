package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The pre-enqueue update filter over the whole scenario set: with it, every
// update it drops is decided on both sides in the run itself (dropPodUpdate,
// a violation if the plans differ); and against a run without it, the same
// writes are applied and the same pods end, warn or go, with fewer syncs.
func TestUpdateFilterKeepsDecisionsAndWrites(t *testing.T) {
	var table strings.Builder
	totalWith, totalWithout, filtered := 0, 0, 0
	for _, sc := range Scenarios {
		pods := 60
		if sc.Pods != 0 && sc.Pods < pods {
			pods = sc.Pods
		}
		with := New(sc, 1, Options{Pods: pods}).Run()
		without := New(sc, 1, Options{Pods: pods, NoUpdateFilter: true}).Run()
		if with.Violation != nil {
			t.Fatalf("%s with the filter:\n%s", sc.Name, with.Violation)
		}
		// Beside OpenKruise's own terminator, which pods race it before the
		// controller has seen it depends on when syncs run, and so does the
		// count of CRRs; that scenario's own check (none beside kruise's once
		// seen) holds with and without the filter.
		if diff := cmp.Diff(without.Applied, with.Applied); diff != "" && !sc.KruiseTerminator {
			t.Errorf("%s: applied writes differ with the filter (-without +with):\n%s", sc.Name, diff)
		}
		if with.Terminal != without.Terminal || with.Warned != without.Warned || with.Gone != without.Gone {
			t.Errorf("%s: done/warned/gone %d/%d/%d with the filter, %d/%d/%d without", sc.Name,
				with.Terminal, with.Warned, with.Gone, without.Terminal, without.Warned, without.Gone)
		}
		if with.Syncs > without.Syncs {
			t.Errorf("%s: %d syncs with the filter, %d without", sc.Name, with.Syncs, without.Syncs)
		}
		totalWith, totalWithout, filtered = totalWith+with.Syncs, totalWithout+without.Syncs, filtered+with.Filtered
		fmt.Fprintf(&table, "%-34s syncs %5d -> %5d, %4d updates dropped\n", sc.Name, without.Syncs, with.Syncs, with.Filtered)
	}
	t.Logf("per scenario (seed 1), without -> with the filter:\n%s", table.String())
	t.Logf("all scenarios: %d -> %d syncs, %d updates dropped", totalWithout, totalWith, filtered)
	if filtered == 0 {
		t.Fatal("the filter dropped nothing over the whole scenario set")
	}
}
