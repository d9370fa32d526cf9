package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
	"github.com/sidecar-terminator/sidecar-terminator/controller/webhook"
)

// controllerFiles parses every non-test Go file under controller/.
func controllerFiles(t *testing.T, r string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(filepath.Join(r, "controller"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

var reasonConstRE = regexp.MustCompile(`^Reason[A-Z]\w*$`)

// eventReasons finds the event reasons the controller can write: every
// string constant named Reason* in controller/, and every string literal
// given as the reason of an Event call. An Event call whose reason is
// neither a Reason* constant nor a Problem's Reason field fails the test,
// so a reason declared another way cannot slip past it.
func eventReasons(t *testing.T, r string) map[string]string {
	t.Helper()
	fset, files := controllerFiles(t, r)
	reasons := map[string]string{}
	for _, f := range files {
		// params: the enclosing function's parameters; an Event call that
		// passes one on is a forwarder (events.go's sharded recorder),
		// whose own callers are checked here.
		params := map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				params = map[string]bool{}
				for _, field := range n.Type.Params.List {
					for _, name := range field.Names {
						params[name.Name] = true
					}
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if !reasonConstRE.MatchString(name.Name) || i >= len(n.Values) {
						continue
					}
					if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						reasons[v] = fset.Position(name.Pos()).String()
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Event" || len(n.Args) != 4 {
					return true
				}
				switch a := n.Args[2].(type) {
				case *ast.BasicLit:
					v, _ := strconv.Unquote(a.Value)
					reasons[v] = fset.Position(a.Pos()).String()
				case *ast.Ident:
					if !reasonConstRE.MatchString(a.Name) && !params[a.Name] {
						t.Errorf("%s: an event reason from %s, not a Reason* constant", fset.Position(a.Pos()), a.Name)
					}
				case *ast.SelectorExpr:
					if !reasonConstRE.MatchString(a.Sel.Name) && a.Sel.Name != "Reason" {
						t.Errorf("%s: an event reason from .%s, not a Reason* constant", fset.Position(a.Pos()), a.Sel.Name)
					}
				default:
					t.Errorf("%s: an event reason this test cannot read", fset.Position(a.Pos()))
				}
			}
			return true
		})
	}
	return reasons
}

// Every event reason the controller can write has a row in
// docs/observability.md's events table, saying what it means and what to do.
func TestEveryEventReasonIsDocumented(t *testing.T) {
	r := root(t)
	reasons := eventReasons(t, r)
	if _, ok := reasons[reconciler.ReasonTerminated]; !ok {
		t.Fatalf("found %v but not %s: the source changed shape", reasons, reconciler.ReasonTerminated)
	}
	doc := read(t, filepath.Join(r, "docs", "observability.md"))
	for _, reason := range sortedKeys(reasons) {
		if !strings.Contains(doc, "| `"+reason+"` |") {
			t.Errorf("docs/observability.md's events table has no row for %s (declared at %s)", reason, rel(r, reasons[reason]))
		}
	}
}

var optsTypes = map[string]bool{"CounterOpts": true, "GaugeOpts": true, "HistogramOpts": true, "SummaryOpts": true}

// registeredMetrics finds the metric names the controller declares: every
// prometheus.*Opts literal in controller/, Namespace_Subsystem_Name.
func registeredMetrics(t *testing.T, r string) map[string]string {
	t.Helper()
	fset, files := controllerFiles(t, r)
	names := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || !optsTypes[sel.Sel.Name] {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			parts := map[string]string{}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
					continue
				}
				v, ok := kv.Value.(*ast.BasicLit)
				if !ok || v.Kind != token.STRING {
					t.Errorf("%s: a metric's %s this test cannot read", fset.Position(kv.Pos()), key.Name)
					continue
				}
				parts[key.Name], _ = strconv.Unquote(v.Value)
			}
			name := prometheus.BuildFQName(parts["Namespace"], parts["Subsystem"], parts["Name"])
			if name == "" {
				t.Errorf("%s: a metric without a name", fset.Position(lit.Pos()))
				return true
			}
			names[name] = fset.Position(lit.Pos()).String()
			return true
		})
	}
	return names
}

// Every metric the controller declares has a row in docs/observability.md.
// What the source yields is checked against real registries first, so the
// reading cannot miss a metric the controller serves.
func TestEveryMetricIsDocumented(t *testing.T) {
	r := root(t)
	names := registeredMetrics(t, r)
	reg := prometheus.NewRegistry()
	reconciler.NewMetrics(reg)
	webhook.NewAdmissionsCounter(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) < 5 {
		t.Fatalf("the registries gathered only %d families", len(families))
	}
	for _, f := range families {
		if _, ok := names[f.GetName()]; !ok {
			t.Errorf("the registry serves %s, which reading the source did not find", f.GetName())
		}
	}
	doc := read(t, filepath.Join(r, "docs", "observability.md"))
	for _, name := range sortedKeys(names) {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/observability.md has no metrics row for %s (declared at %s)", name, rel(r, names[name]))
		}
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
