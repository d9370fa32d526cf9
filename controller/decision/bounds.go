package decision

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on what the controller reads from pods and what it writes about
// them. A pod author controls the marks' values, and the controller keeps
// them in its cache, quotes them in Warnings (which are also the per-pod
// dedup key and client-go's event cache key) and logs them: unbounded, one
// namespace of pods with megabyte values exhausts the controller's memory
// and the events are too large for etcd.
const (
	// MaxValueLen bounds each value read from a pod: our env values, our
	// annotations, image references. A valid image reference is at most
	// about 520 bytes (a 255-byte name, a 128-byte tag, a digest), and the
	// sidecars annotation lists container names of at most 63 bytes. The
	// cache keeps at most MaxValueLen+1 bytes of a value, so a longer one is
	// still seen to be too long.
	MaxValueLen = 4096
	// QuotedPrefixLen is how much of a bad value a message quotes.
	QuotedPrefixLen = 64
	// MaxMessageLen bounds every event message and log line built from a
	// decision.
	MaxMessageLen = 1024
)

// TooLong reports whether a value read from a pod is over MaxValueLen.
func TooLong(v string) bool { return len(v) > MaxValueLen }

// Quote quotes a value read from a pod, cut to QuotedPrefixLen bytes (at a
// rune boundary) with "..." when it was longer.
func Quote(v string) string {
	if len(v) <= QuotedPrefixLen {
		return fmt.Sprintf("%q", v)
	}
	cut := QuotedPrefixLen
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%q...", v[:cut])
}

// BoundMessage cuts a message to MaxMessageLen bytes, at a rune boundary.
func BoundMessage(m string) string {
	if len(m) <= MaxMessageLen {
		return m
	}
	const tail = " ... (cut)"
	cut := MaxMessageLen - len(tail)
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return strings.Clone(m[:cut]) + tail
}

// tooLongMessage says a value is over the bound, quoting only its start.
func tooLongMessage(what, v string) string {
	return fmt.Sprintf("%s is over %d bytes, beginning %s; it is not used", what, MaxValueLen, Quote(v))
}
