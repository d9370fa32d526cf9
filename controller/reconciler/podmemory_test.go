package reconciler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// What the controller remembers of a pod has one home: podMemory's fields
// are read and written in podmemory.go only, every other file goes through
// its methods. The package is type-checked here (against the export data
// `go list -export` gives for its imports) so a field reached from anywhere
// else, however the variable is named, fails the test.
func TestPodMemorysFieldsAreTouchedOnlyInPodmemoryGo(t *testing.T) {
	pkg, fset, info, files := typeCheckThisPackage(t)
	// podMemory and the parts it points to: its rare memory and echo note.
	fields := map[types.Object]bool{}
	var obj types.Object
	for _, name := range []string{"podMemory", "rareMemory", "echoNote"} {
		o := pkg.Scope().Lookup(name)
		if o == nil {
			t.Fatalf("no type %s in the package", name)
		}
		st, ok := o.Type().Underlying().(*types.Struct)
		if !ok {
			t.Fatalf("%s is a %T, not a struct", name, o.Type().Underlying())
		}
		for i := range st.NumFields() {
			fields[st.Field(i)] = true
		}
		if obj == nil {
			obj = o
		}
	}
	if len(fields) < 20 {
		t.Fatalf("podMemory and its parts have %d fields: the test reads the wrong types", len(fields))
	}
	home := func(pos token.Pos) bool { return filepath.Base(fset.Position(pos).Filename) == "podmemory.go" }

	touched := 0
	for sel, s := range info.Selections {
		if s.Kind() != types.FieldVal || !fields[s.Obj()] {
			continue
		}
		touched++
		if !home(sel.Pos()) {
			t.Errorf("%s: field %s of a pod's memory is touched outside podmemory.go; add a method there, named for the moment of the sync", fset.Position(sel.Pos()), s.Obj().Name())
		}
	}
	// A keyed literal sets fields without a selector.
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if ok && types.Identical(info.TypeOf(lit), obj.Type()) && !home(lit.Pos()) && len(lit.Elts) > 0 {
				t.Errorf("%s: a podMemory literal sets its fields outside podmemory.go (use newPodMemory)", fset.Position(lit.Pos()))
			}
			return true
		})
	}
	if touched == 0 {
		t.Fatal("no use of podMemory's fields found at all: the check sees nothing")
	}
}

// typeCheckThisPackage type-checks the package's non-test files.
func typeCheckThisPackage(t *testing.T) (*types.Package, *token.FileSet, *types.Info, []*ast.File) {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export,GoFiles,Dir", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("go list -export: %v", err)
	}
	type listed struct {
		ImportPath, Export, Dir string
		GoFiles                 []string
	}
	exports := map[string]string{}
	var self listed // with -deps, the package itself comes last
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		self = p
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range self.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(self.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})}
	pkg, err := conf.Check(self.ImportPath, fset, files, info)
	if err != nil {
		t.Fatalf("type-check %s: %v", self.ImportPath, err)
	}
	return pkg, fset, info, files
}
