package bench

import (
	"testing"
	"time"
)

// The bound the apiserver-restart check holds a pod's refused writes to.
func TestRefusalsWithin(t *testing.T) {
	for _, tc := range []struct {
		window, base time.Duration
		want         int
	}{
		{0, 5 * time.Second, 1},
		{4 * time.Second, 5 * time.Second, 1},
		{5 * time.Second, 5 * time.Second, 2},  // 0, 5
		{25 * time.Second, 5 * time.Second, 3}, // 0, 5, 15
		{35 * time.Second, 5 * time.Second, 4}, // 0, 5, 15, 35
		{time.Hour, 0, 1},                      // a zero backoff ends the count rather than looping
	} {
		if got := refusalsWithin(tc.window, tc.base); got != tc.want {
			t.Errorf("refusalsWithin(%s, %s) = %d, want %d", tc.window, tc.base, got, tc.want)
		}
	}
}
