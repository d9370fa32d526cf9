package decision

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// The memo answers as go-containerregistry does, on the first ask and on
// every later one, for valid and invalid references alike, and it never
// holds more than maxParsed strings.
func TestAParsedImageIsGoContainerRegistrysParse(t *testing.T) {
	refs := []string{
		"busybox", "busybox:1.36", "docker.io/library/busybox:latest", "registry.local:5000/team/exit:v1",
		"ghcr.io/org/exit@sha256:" + strings.Repeat("a", 64), "exit:1@sha256:" + strings.Repeat("b", 64),
		"", "UPPER/case", "bad image", "registry.local:5000/", "exit:", "a/b/c/d/e:f", "*",
		strings.Repeat("x", MaxValueLen+1),
	}
	for round := range 3 {
		for _, s := range refs {
			label := s[:min(len(s), 40)]
			want, werr := name.ParseReference(s)
			got := parsedImage(s)
			if (werr == nil) != (got.err == nil) || (werr != nil && werr.Error() != got.err.Error()) {
				t.Fatalf("round %d, %q: error %v, want %v", round, label, got.err, werr)
			}
			if werr == nil && (got.name != want.Name() || got.repository != want.Context().Name()) {
				t.Fatalf("round %d, %q: %q in %q, want %q in %q", round, label, got.name, got.repository, want.Name(), want.Context().Name())
			}
			wantRepo, rerr := name.NewRepository(s)
			gotRepo := parsedRepository(s)
			if (rerr == nil) != (gotRepo.err == nil) || (rerr == nil && gotRepo.name != wantRepo.Name()) {
				t.Fatalf("round %d, %q: repository %q (%v), want %v (%v)", round, label, gotRepo.name, gotRepo.err, wantRepo, rerr)
			}
		}
	}
	for i := range 3 * maxParsed {
		s := fmt.Sprintf("registry.local/exit:%d", i)
		if got := parsedImage(s); got.err != nil || got.name != s {
			t.Fatalf("%s parsed as %q (%v)", s, got.name, got.err)
		}
		parsed.Lock()
		n := len(parsed.images)
		parsed.Unlock()
		if n > maxParsed {
			t.Fatalf("the memo holds %d strings, over %d", n, maxParsed)
		}
	}
}
