package readme

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSectionAndShellCommands(t *testing.T) {
	root := t.TempDir()
	doc := "# x\n\n## One\n\n```sh\nhelm install a \\\n  --set b=c   # note\n# a comment\n\nmake test\n```\n\n### Sub\n\n```go\nnot shell\n```\n\n## Two\n\n```sh\nmake demo\n```\n"
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	one, err := Section(root, "## One")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ShellCommands(one), []string{"helm install a    --set b=c   # note", "make test"}; !slices.Equal(got, want) {
		t.Errorf("commands of One = %q, want %q", got, want)
	}
	if got := ShellCommands(doc); len(got) != 3 || got[2] != "make demo" {
		t.Errorf("commands of the whole README = %q", got)
	}
	if _, err := Section(root, "## Three"); err == nil {
		t.Error("a missing section gave no error")
	}
}
