package reconciler

import (
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// A refusal's text is kept whole up to the bound, inclusive; past it, it is
// cut on a rune boundary and marked, and a text with no rune start before
// the bound (bytes that are not UTF-8, as a webhook may send) is cut to
// nothing rather than read out of range.
func TestBoundedMessageAtTheBound(t *testing.T) {
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

// A server timeout whose Retry-After is zero suggests a delay of zero: it is
// backed off as any error, not requeued at once (a zero AddAfter is a hot
// loop).
func TestRequeueOfAServerTimeoutWithoutRetryAfter(t *testing.T) {
	err := apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "patch", 0)
	if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 0 {
		t.Fatalf("SuggestsClientDelay = %d, %v; the case needs a suggested delay of zero", s, ok)
	}
	q := &recordingQueue{}
	Requeue[string](q, "p", 0, err)
	if want := []string{"AddRateLimited p"}; !slices.Equal(q.calls, want) {
		t.Errorf("%v, want %v", q.calls, want)
	}
}
