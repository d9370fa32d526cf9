package kube

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// After an outage every pod in flight has failed many times; each must come
// back on its own back-off, capped, not queued behind the others.
func TestRetryBackOffIsPerPodAndCapped(t *testing.T) {
	rl := retryRateLimiter()
	pod := func(i int) cache.ObjectName { return cache.ObjectName{Namespace: "ns", Name: fmt.Sprintf("p%d", i)} }
	for i := 0; i < 1000; i++ {
		for f := 0; f < 11; f++ {
			rl.When(pod(i))
		}
	}
	// The 12th failure of the last pod waits 5 ms × 2^11 ≈ 10 s, as the
	// first pod's does: no shared bucket stacks the 11,000 retries up.
	if first, last := rl.When(pod(0)), rl.When(pod(999)); first != last || last > 11*time.Second {
		t.Errorf("12th retry: first pod %s, last pod %s; want equal and ≈10s", first, last)
	}
	if got := rl.When(pod(1000)); got != reconciler.RetryBaseDelay {
		t.Errorf("a new pod's first retry waits %s, want %s", got, reconciler.RetryBaseDelay)
	}
	for f := 0; f < 30; f++ {
		rl.When(pod(1))
	}
	// The cap is 30 s, not client-go's 1,000 s: a pod that failed through an
	// API-server outage is looked at again within 30 s of its recovery.
	// (Stated here as the number, so a changed constant cannot agree with itself.)
	if got := rl.When(pod(1)); got != 30*time.Second {
		t.Errorf("a pod failing for long waits %s, want the cap 30s", got)
	}
	rl.Forget(pod(1))
	if got := rl.When(pod(1)); got != reconciler.RetryBaseDelay {
		t.Errorf("after a success the back-off starts over at %s, got %s", reconciler.RetryBaseDelay, got)
	}
}
