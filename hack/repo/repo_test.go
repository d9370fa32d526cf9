package repo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRootIsTheModuleRoot(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "Makefile", filepath.Join("hack", "repo", "repo.go")} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s has no %s: %v", root, f, err)
		}
	}
}
