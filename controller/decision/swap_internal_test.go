package decision

import (
	"strings"
	"testing"
)

// sameImage: the node reports the reference it resolved, so a reported
// image matches the spec's when it is the same or ends in "/" + the spec's.
func TestAReportedImageMatchesTheSpecOrEndsInIt(t *testing.T) {
	for _, tc := range []struct {
		reported, spec string
		want           bool
	}{
		{"busybox:1", "busybox:1", true},
		{"docker.io/library/busybox:1", "busybox:1", true},
		{"docker.io/library/xbusybox:1", "busybox:1", false},
		{"docker.io/library/busybox:2", "busybox:1", false},
		{"busybox:1", "docker.io/library/busybox:1", false},
		{"xbusybox:1", "busybox:1", false},
	} {
		if got := sameImage(tc.reported, tc.spec); got != tc.want {
			t.Errorf("sameImage(%q, %q) = %v, want %v", tc.reported, tc.spec, got, tc.want)
		}
	}
}

// bounded keeps a reported string whole up to the bound, inclusive.
func TestAReportedStringIsKeptWholeUpToTheBound(t *testing.T) {
	exact := strings.Repeat("a", MaxRefusalMessage)
	if got := bounded(exact); got != exact {
		t.Errorf("a string of exactly the bound was cut: %d bytes", len(got))
	}
	if got := bounded(exact + "b"); got != exact+"..." {
		t.Errorf("one byte over: %q", got[len(got)-5:])
	}
}
