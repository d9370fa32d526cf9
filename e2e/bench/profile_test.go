package bench

import (
	"testing"
	"time"
)

func TestAProfileIsWaitedForAsLongAsItRuns(t *testing.T) {
	for query, want := range map[string]time.Duration{
		"profile?seconds=400": 400*time.Second + 5*time.Minute, // a whole 50/s burst of 20,000 pods
		"profile?seconds=30":  30*time.Second + 5*time.Minute,
		"heap":                5 * time.Minute,
	} {
		if got := fetchTimeout(query); got != want {
			t.Errorf("fetchTimeout(%q) = %v, want %v", query, got, want)
		}
	}
}
