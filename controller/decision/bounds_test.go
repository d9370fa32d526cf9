package decision_test

import (
	"strings"
	"testing"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// TestOverlongValuesAreInvalidAndQuotedOnlyInPart: a megabyte in any value
// the controller reads from a pod makes that value unusable, with a Warning
// whose message stays bounded and quotes only the value's start.
func TestOverlongValuesAreInvalidAndQuotedOnlyInPart(t *testing.T) {
	huge := DefaultQuickExitRepository + ":" + strings.Repeat("a", 1<<20)
	cases := map[string]struct {
		pod    *podtest.Builder
		reason string
	}{
		"image env": {pod: podtest.Pod("p").Container("main", exited(0)).
			Container("log", podtest.Env(EnvTerminateWithImage, huge)), reason: ReasonInvalidQuickExitImage},
		"terminate env": {pod: podtest.Pod("p").Container("main", exited(0)).
			Container("log", podtest.Env(EnvTerminate, huge)), reason: ReasonInvalidSidecarEnv},
		"quick-exit annotation": {pod: podtest.Pod("p").Annotate(AnnotationSidecars, "log").
			Annotate(AnnotationQuickExitImage, huge).Container("main", exited(0)).Container("log"), reason: ReasonInvalidQuickExitImage},
		"sidecars annotation": {pod: podtest.Pod("p").Annotate(AnnotationSidecars, "log,"+huge).
			Container("main", exited(0)).Container("log"), reason: ReasonUnknownSidecarName},
		"own image of the sidecar": {pod: podtest.Pod("p").Container("main", exited(0)).
			Container("log", markImage, podtest.Image(huge)), reason: ReasonInvalidQuickExitImage},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctrs, problems := Classify(tc.pod.Build(), DefaultPolicy())
			var found bool
			for _, p := range problems {
				if len(p.Message) > MaxMessageLen {
					t.Errorf("%s message is %d bytes, over %d", p.Reason, len(p.Message), MaxMessageLen)
				}
				if strings.Contains(p.Message, strings.Repeat("a", QuotedPrefixLen+1)) {
					t.Errorf("%s message quotes more than a prefix: %.200s", p.Reason, p.Message)
				}
				found = found || p.Reason == tc.reason
			}
			if !found {
				t.Errorf("no %s among %+v", tc.reason, problems)
			}
			for _, c := range ctrs {
				if c.QuickExitImage != "" {
					t.Errorf("container %s may be swapped to an over-long image", c.Name)
				}
			}
		})
	}
}

func TestBoundMessageAndQuote(t *testing.T) {
	if m := BoundMessage(strings.Repeat("é", MaxMessageLen)); len(m) > MaxMessageLen || !strings.HasSuffix(m, "(cut)") {
		t.Errorf("BoundMessage: %d bytes, %q", len(m), m[len(m)-20:])
	}
	if q := Quote(strings.Repeat("é", 100)); len(q) > QuotedPrefixLen+8 || !strings.HasSuffix(q, `"...`) {
		t.Errorf("Quote: %q", q)
	}
	if q := Quote("short"); q != `"short"` {
		t.Errorf("Quote(short) = %s", q)
	}
}

// Quote keeps a value of exactly QuotedPrefixLen bytes whole and cuts one
// byte longer: the bound is inclusive.
func TestQuoteAtTheBound(t *testing.T) {
	at := strings.Repeat("a", QuotedPrefixLen)
	if q := Quote(at); q != `"`+at+`"` {
		t.Errorf("Quote(%d bytes) = %s, want it whole", len(at), q)
	}
	if q := Quote(at + "b"); q != `"`+at+`"...` {
		t.Errorf("Quote(%d bytes) = %s, want the first %d and ...", len(at)+1, q, QuotedPrefixLen)
	}
}

// The Warning for an unusable mark value says what was found: the literal
// value quoted, or that it came from a valueFrom.
func TestInvalidMarkValueIsDescribed(t *testing.T) {
	for name, tc := range map[string]struct {
		opt  podtest.Option
		want string
	}{
		"literal":   {opt: podtest.Env(EnvTerminate, "yes"), want: `got "yes";`},
		"valueFrom": {opt: podtest.EnvFrom(EnvTerminate, "metadata.name"), want: "got a valueFrom;"},
	} {
		t.Run(name, func(t *testing.T) {
			_, problems := Classify(podtest.Pod("p").Container("main", exited(0)).Container("log", tc.opt).Build(), DefaultPolicy())
			if len(problems) != 1 || problems[0].Reason != ReasonInvalidSidecarEnv || !strings.Contains(problems[0].Message, tc.want) {
				t.Errorf("problems %+v, want one %s saying %q", problems, ReasonInvalidSidecarEnv, tc.want)
			}
		})
	}
}

// The bounds are inclusive: a value of exactly MaxValueLen bytes is usable,
// a message of exactly MaxMessageLen bytes is kept whole.
func TestBoundsAreInclusive(t *testing.T) {
	if TooLong(strings.Repeat("a", MaxValueLen)) || !TooLong(strings.Repeat("a", MaxValueLen+1)) {
		t.Errorf("TooLong: want false at %d bytes and true at %d", MaxValueLen, MaxValueLen+1)
	}
	at := strings.Repeat("a", MaxMessageLen)
	if m := BoundMessage(at); m != at {
		t.Errorf("BoundMessage cut a message of exactly %d bytes to %d", MaxMessageLen, len(m))
	}
	if m := BoundMessage(at + "b"); len(m) > MaxMessageLen || !strings.HasSuffix(m, " ... (cut)") {
		t.Errorf("BoundMessage of %d bytes: %d bytes, %q", MaxMessageLen+1, len(m), m[len(m)-20:])
	}
}

// Cuts fall on rune boundaries, whatever the rune's width, and bytes that
// are not UTF-8 at all (no rune starts anywhere) are cut, not a panic.
func TestCutsKeepRunesWhole(t *testing.T) {
	euro := strings.Repeat("€", 30) // 3 bytes each: QuotedPrefixLen (64) falls inside the 22nd
	if q, want := Quote(euro), `"`+strings.Repeat("€", QuotedPrefixLen/3)+`"...`; q != want {
		t.Errorf("Quote(30 euro signs) = %s, want %s", q, want)
	}
	msg := "a" + strings.Repeat("€", MaxMessageLen) // the cut point, 1014, falls inside a rune too
	if m, want := BoundMessage(msg), "a"+strings.Repeat("€", (MaxMessageLen-len(" ... (cut)")-1)/3)+" ... (cut)"; m != want {
		t.Errorf("BoundMessage(euro signs): %d bytes ending %q, want %d bytes", len(m), m[len(m)-20:], len(want))
	}
	junk := strings.Repeat("\x80", 2*MaxMessageLen) // continuation bytes only
	if q := Quote(junk); q != `""...` {
		t.Errorf("Quote(continuation bytes) = %s, want an empty prefix", q)
	}
	if m := BoundMessage(junk); m != " ... (cut)" {
		t.Errorf("BoundMessage(continuation bytes) = %q, want the cut mark only", m)
	}
}
