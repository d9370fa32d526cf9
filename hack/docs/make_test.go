package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// docPages are the pages whose commands and values are checked: the user
// docs and the chart's install guide.
func docPages(t *testing.T, r string) []string {
	return append(userDocs(t, r), filepath.Join(r, "controller", "deploy", "INSTALL.md"))
}

var (
	includeRE = regexp.MustCompile(`(?m)^-?include\s+(\S+)`)
	ruleRE    = regexp.MustCompile(`(?m)^([a-zA-Z0-9_.-]+(?:[ \t]+[a-zA-Z0-9_.-]+)*)[ \t]*::?(?:[^=]|$)`)
	varRE     = regexp.MustCompile(`\$[({]([A-Za-z0-9_]+)[)}]|(?m)^(?:export\s+)?([A-Za-z0-9_]+)\s*[?:+]?=`)
)

// makefile reads the targets and the variables of the Makefile and of every
// file it includes.
func makefile(t *testing.T, r string) (targets, vars map[string]bool) {
	t.Helper()
	targets, vars = map[string]bool{}, map[string]bool{}
	files := []string{"Makefile"}
	for i := 0; i < len(files); i++ {
		raw, err := os.ReadFile(filepath.Join(r, files[i]))
		if err != nil {
			if i == 0 {
				t.Fatal(err)
			}
			t.Errorf("the Makefile includes %s, which does not exist", files[i])
			continue
		}
		text := string(raw)
		for _, m := range includeRE.FindAllStringSubmatch(text, -1) {
			files = append(files, m[1])
		}
		for _, m := range ruleRE.FindAllStringSubmatch(text, -1) {
			for _, name := range strings.Fields(m[1]) {
				if !strings.HasPrefix(name, ".") {
					targets[name] = true
				}
			}
		}
		for _, m := range varRE.FindAllStringSubmatch(text, -1) {
			vars[m[1]+m[2]] = true
		}
	}
	return targets, vars
}

var makeUseRE = regexp.MustCompile(`(?:^|[;&|(]\s*|\s)(make(?:\s+[^\s;&|)#]+)+)`)

// makeUses returns every `make ...` a page shows, as a command or in prose.
func makeUses(text string) []string {
	var out []string
	for _, cmd := range Commands(text) {
		cmd, _, _ = strings.Cut(cmd, " #")
		for _, m := range makeUseRE.FindAllStringSubmatch(" "+cmd, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// Every `make X VAR=...` the docs name is a target of the Makefile (or a
// file it includes), and each variable it sets is one the Makefile reads.
func TestMakeTargetsNamedInDocsExist(t *testing.T) {
	r := root(t)
	targets, vars := makefile(t, r)
	if !targets["test"] || !targets["demo"] {
		t.Fatalf("found targets %v, without test and demo: the Makefile changed shape", targets)
	}
	uses := 0
	for _, page := range docPages(t, r) {
		for _, use := range makeUses(read(t, page)) {
			uses++
			for _, w := range strings.Fields(use)[1:] {
				name, _, isVar := strings.Cut(w, "=")
				switch {
				case strings.HasPrefix(w, "-"):
				case isVar && !vars[name]:
					t.Errorf("%s: %q: the Makefile reads no variable %s", rel(r, page), use, name)
				case !isVar && !targets[w]:
					t.Errorf("%s: %q: the Makefile has no target %s", rel(r, page), use, w)
				}
			}
		}
	}
	if uses < 20 {
		t.Fatalf("found only %d make commands in the docs: they changed shape or makeUses broke", uses)
	}
}

var (
	setRE = regexp.MustCompile(`--set(?:-string|-json|-file)?[ =]'?([^ '=]+)=`)
	// A values path in a code span: dotted identifiers only.
	pathSpanRE = regexp.MustCompile("`([a-zA-Z][a-zA-Z0-9]*(?:\\.[a-zA-Z][a-zA-Z0-9]*)+)(?:=[^`]*)?`")
	// OpenKruise's chart is installed with values of its own.
	otherChartRE = regexp.MustCompile(`helm\s+(?:upgrade\s+--install|install|upgrade|template)\s+kruise\b`)
)

// Every chart value the docs name exists in the chart's values.yaml: the
// key of each `--set key=...` given to this project's chart, and each
// dotted path in a code span whose first part is a top-level value.
func TestChartValuesNamedInDocsExist(t *testing.T) {
	r := root(t)
	var values map[string]any
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(r, "controller", "deploy", "chart", "sidecar-terminator", "values.yaml"))), &values); err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, page := range docPages(t, r) {
		text := read(t, page)
		var paths []string
		for _, cmd := range Commands(text) {
			if otherChartRE.MatchString(cmd) {
				continue
			}
			for _, m := range setRE.FindAllStringSubmatch(cmd, -1) {
				paths = append(paths, m[1])
			}
		}
		for _, m := range pathSpanRE.FindAllStringSubmatch(strings.Join(ProseLines(text), " "), -1) {
			if _, top := values[strings.Split(m[1], ".")[0]]; top {
				paths = append(paths, m[1])
			}
		}
		for _, p := range paths {
			named++
			if !hasValue(values, strings.Split(p, ".")) {
				t.Errorf("%s: names the chart value %s, which values.yaml does not have", rel(r, page), p)
			}
		}
	}
	if named < 10 {
		t.Fatalf("found only %d chart values named in the docs: they changed shape or the patterns broke", named)
	}
}

// hasValue reports whether path leads through values.yaml's maps to a key;
// an empty map (free-form, like podAnnotations) takes any key below it.
func hasValue(values map[string]any, path []string) bool {
	cur := any(values)
	for _, key := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if len(m) == 0 {
			return true
		}
		if cur, ok = m[key]; !ok {
			return false
		}
	}
	return true
}
