package docs

import (
	"path/filepath"
	"testing"
)

// docs/observability.md shows the output of a real explain run: the golden
// file e2e/realnode writes and checks (make explain-golden).
func TestExplainExampleIsTheRealRun(t *testing.T) {
	r := root(t)
	golden := read(t, filepath.Join(r, ExplainGolden))
	shown, err := ExplainExample(read(t, filepath.Join(r, "docs", "observability.md")))
	if err != nil {
		t.Fatalf("docs/observability.md: %v", err)
	}
	if shown != golden {
		t.Errorf("docs/observability.md's explain example differs from %s (make explain-golden writes both):\n--- docs\n%s\n--- golden\n%s", ExplainGolden, shown, golden)
	}
}
