package decision

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// constStrings returns the string constants of this package whose names
// start with prefix, read from its source: a reason added anywhere in the
// package without listing it fails here.
func constStrings(t *testing.T, prefix string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range pkgs["decision"].Files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s* constants found", prefix)
	}
	return out
}

func TestWarningReasonsListsEveryReason(t *testing.T) {
	listed := WarningReasons()
	for name, v := range constStrings(t, "Reason") {
		if !slices.Contains(listed, v) {
			t.Errorf("%s (%q) is not in WarningReasons (reasons.go): its warnings_total series would not start at zero", name, v)
		}
	}
}

func TestVerdictsListsEveryVerdict(t *testing.T) {
	listed := Verdicts()
	for name, v := range constStrings(t, "Verdict") {
		if !slices.Contains(listed, Verdict(v)) {
			t.Errorf("%s (%q) is not in Verdicts (reasons.go)", name, v)
		}
	}
}
