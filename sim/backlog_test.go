package sim

import "testing"

// A burst under backlog: every pod's sidecar is stopped with exactly one
// write call, none refused or doomed, while the cache lags past the
// expectation timeout and the CRR deadline (issue 13: one write per pod
// under any backlog). Before, the sync past the timeout sent the CRR again
// and the swap again with every retry, and a CRR seen past its deadline
// beside a sidecar the cache still showed running got a second attempt.
func TestBurstBacklogOneWritePerPod(t *testing.T) {
	sc, err := Lookup("burst-backlog")
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 2; seed++ {
		r := New(sc, seed, Options{}).Run()
		if r.Violation != nil {
			t.Fatalf("seed %d:\n%s", seed, r.Violation)
		}
		calls, applied := 0, 0
		for m, n := range r.Calls {
			calls += n
			applied += r.Applied[m]
		}
		if calls != r.Pods || applied != r.Pods || r.Terminal != r.Pods {
			t.Errorf("seed %d: %d write calls (%v), %d applied (%v), %d pods done, for %d pods: want one write per pod",
				seed, calls, r.Calls, applied, r.Applied, r.Terminal, r.Pods)
		}
		t.Logf("seed %d: %d syncs, %d live reads, p99 %s", seed, r.Syncs, r.LiveReads, r.P99)
	}
}
