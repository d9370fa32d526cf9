package app

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The operator reads how long events may wait, and how many, in
// docs/observability.md: the text must name the bounds the code has.
func TestTheEventBoundsAreTheDocumentedOnes(t *testing.T) {
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	if maxEventDefer%time.Minute != 0 {
		t.Fatalf("maxEventDefer %s is not whole minutes; say it in the doc as it is", maxEventDefer)
	}
	for _, want := range []string{
		fmt.Sprintf("waits at most %d minutes from its decision", int(maxEventDefer/time.Minute)),
		fmt.Sprintf("at most %s wait at once", thousands(maxPendingEvents)),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("docs/observability.md does not say %q", want)
		}
	}
}

// thousands writes n as the docs do: 64,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
