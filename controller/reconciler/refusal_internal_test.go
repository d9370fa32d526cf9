package reconciler

import (
	"strings"
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// A refusal's text is kept whole up to the bound, inclusive; past it, it is
// cut on a rune boundary and marked, and a text with no rune start before
// the bound (bytes that are not UTF-8, as a webhook may send) is cut to
// nothing rather than read out of range.
func TestARefusalsTextIsKeptWholeUpToTheBound(t *testing.T) {
	max := decision.MaxRefusalMessage
	exact := strings.Repeat("a", max)
	// "é" is two bytes; placed so that the bound falls inside it.
	straddle := strings.Repeat("a", max-1) + "é" + "tail"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"exactly the bound", exact, exact},
		{"one byte over", exact + "b", exact + "..."},
		{"a rune across the bound", straddle, strings.Repeat("a", max-1) + "..."},
		{"no rune start", strings.Repeat("\x80", max+1), "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := boundedMessage(tc.in); got != tc.want {
				t.Errorf("boundedMessage(%d bytes) = %q (%d bytes), want %d bytes", len(tc.in), got, len(got), len(tc.want))
			}
		})
	}
}
