package deploy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sidecar-terminator/sidecar-terminator/hack/readme"
)

// readmeSection returns the text of the README's section under heading.
func readmeSection(t *testing.T, root, heading string) string {
	t.Helper()
	section, err := readme.Section(root, heading)
	if err != nil {
		t.Fatal(err)
	}
	return section
}

// shellWords splits a command as sh does for the quoting these commands
// use: single quotes keep everything, a backslash outside them escapes.
func shellWords(cmd string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == '\\' && i+1 < len(cmd):
			i++
			cur.WriteByte(cmd[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// flagValues returns the values of a flag given as "--f v" or "--f=v".
func flagValues(words []string, flag string) []string {
	var out []string
	for i, w := range words {
		switch {
		case w == flag && i+1 < len(words):
			out = append(out, words[i+1])
		case strings.HasPrefix(w, flag+"="):
			out = append(out, strings.TrimPrefix(w, flag+"="))
		}
	}
	return out
}

// hasValue reports whether the dotted key is a value of the chart.
func hasValue(values map[string]any, key string) bool {
	var cur any = values
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// placeholders the README shows for what each operator fills in; rendered
// with a value of the right form.
var placeholders = strings.NewReplacer("<digest>", strings.Repeat("ab", 32))

// The README's "Install on a cluster" section, as written: each helm
// install names this chart, the values it sets exist and the chart renders
// with them (helm template, no cluster); kubectl apply -k names the
// kustomize base; OpenKruise is installed at the chart version and with
// the feature gates the kind install uses, its own SidecarTerminator off.
func TestReadmeInstallCommandsMatchTheChart(t *testing.T) {
	root := repoRoot(t)
	section := readmeSection(t, root, "## Install on a cluster")
	raw, err := os.ReadFile(filepath.Join(ChartDir(root), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	upSh, err := os.ReadFile(filepath.Join(root, "kind", "up.sh"))
	if err != nil {
		t.Fatal(err)
	}
	kindKruise := regexp.MustCompile(`KRUISE_CHART_VERSION:-([0-9.]+)`).FindSubmatch(upSh)
	kindGates := regexp.MustCompile(`--set '(featureGates=[^']*)'`).FindSubmatch(upSh)
	if kindKruise == nil || kindGates == nil {
		t.Fatal("kind/up.sh no longer names OpenKruise's chart version and feature gates as this test reads them")
	}

	// --set examples given in the prose, outside the sh blocks.
	var prose [][]string
	for _, m := range regexp.MustCompile("`(--set '[^`]*')`").FindAllStringSubmatch(section, -1) {
		prose = append(prose, shellWords(m[1]))
	}
	ours, kustomize, kruise := 0, 0, 0
	for _, cmd := range readme.ShellCommands(section) {
		words := shellWords(placeholders.Replace(cmd))
		switch {
		case len(words) >= 4 && words[0] == "helm" && words[1] == "install" && words[3] == "kruise":
			kruise++
			if v := flagValues(words, "--version"); len(v) != 1 || v[0] != string(kindKruise[1]) {
				t.Errorf("%q: OpenKruise chart version %v, kind/up.sh installs %s", cmd, v, kindKruise[1])
			}
			if s := flagValues(words, "--set"); len(s) != 1 || s[0] != strings.ReplaceAll(string(kindGates[1]), `\,`, ",") && s[0] != string(kindGates[1]) {
				t.Errorf("%q: --set %v, kind/up.sh sets %s", cmd, s, kindGates[1])
			} else if !strings.Contains(s[0], "SidecarTerminator=false") {
				t.Errorf("%q: OpenKruise's own SidecarTerminator is not turned off", cmd)
			}
		case len(words) >= 4 && words[0] == "helm" && words[1] == "install":
			ours++
			if filepath.Join(root, words[3]) != ChartDir(root) {
				t.Errorf("%q installs %s, not the chart at %s", cmd, words[3], ChartDir(root))
			}
			ns := flagValues(words, "--namespace")
			if len(ns) != 1 {
				t.Errorf("%q: no single --namespace", cmd)
				continue
			}
			sets := [][]string{flagValues(words, "--set")}
			if len(sets[0]) == 0 {
				// The plain install, also with each --set the prose shows.
				for _, p := range prose {
					sets = append(sets, flagValues(p, "--set"))
				}
			}
			for _, set := range sets {
				var args []string
				for _, s := range set {
					key, _, _ := strings.Cut(s, "=")
					if !hasValue(values, key) {
						t.Errorf("%q: --set %s: the chart has no value %q", cmd, s, key)
					}
					args = append(args, "--set", s)
				}
				objs, err := Template(context.Background(), helmBinary(t), ChartDir(root), ns[0], args...)
				if err != nil {
					t.Errorf("%q with %v: the chart does not render: %v", cmd, args, err)
					continue
				}
				only(t, objs, "Deployment")
			}
		case len(words) == 4 && words[0] == "kubectl" && words[1] == "apply" && words[2] == "-k":
			kustomize++
			if filepath.Join(root, words[3]) != BaseDir(root) {
				t.Errorf("%q: not the kustomize base %s", cmd, BaseDir(root))
			}
			if _, err := os.Stat(filepath.Join(root, words[3], "kustomization.yaml")); err != nil {
				t.Errorf("%q: %v", cmd, err)
			}
		default:
			t.Errorf("the install section runs %q, which this test does not check: add it here", cmd)
		}
	}
	if ours < 2 || kustomize != 1 || kruise != 1 || len(prose) == 0 {
		t.Errorf("found %d installs of the chart, %d kustomize applies, %d OpenKruise installs and %d prose --set examples: the section changed shape",
			ours, kustomize, kruise, len(prose))
	}
}

// makefileTargets reads the targets `make help` lists (a "## " comment on
// the target's line, as its grep wants) and every variable named in the
// Makefile and the files it includes.
func makefileTargets(t *testing.T, root string) (targets, vars map[string]bool) {
	t.Helper()
	targets, vars = map[string]bool{}, map[string]bool{}
	files := []string{"Makefile"}
	for i := 0; i < len(files); i++ {
		raw, err := os.ReadFile(filepath.Join(root, files[i]))
		if err != nil {
			if i == 0 {
				t.Fatal(err)
			}
			continue // -include of a file that does not exist
		}
		text := string(raw)
		for _, m := range regexp.MustCompile(`(?m)^-?include\s+(\S+)`).FindAllStringSubmatch(text, -1) {
			files = append(files, m[1])
		}
		for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_-]+):[^=].*## `).FindAllStringSubmatch(text, -1) {
			targets[m[1]] = true
		}
		for _, m := range regexp.MustCompile(`\$\(([A-Z0-9_]+)\)|(?m)^([A-Z0-9_]+)\s*[?:]?=`).FindAllStringSubmatch(text, -1) {
			vars[m[1]+m[2]] = true
		}
	}
	return targets, vars
}

// Every `make X VAR=...` the README names is a target `make help` lists,
// and each variable it sets is one the Makefile reads.
func TestReadmeMakeTargetsExist(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	targets, vars := makefileTargets(t, root)
	var uses []string
	for _, m := range regexp.MustCompile("`(make [^`]*)`").FindAllStringSubmatch(string(raw), -1) {
		uses = append(uses, m[1])
	}
	for _, cmd := range readme.ShellCommands(string(raw)) {
		if strings.HasPrefix(cmd, "make ") {
			cmd, _, _ = strings.Cut(cmd, "#")
			uses = append(uses, cmd)
		}
	}
	if len(uses) < 5 {
		t.Fatalf("found only %v: the README changed shape", uses)
	}
	for _, use := range uses {
		words := strings.Fields(use)
		for _, w := range words[1:] {
			name, _, isVar := strings.Cut(w, "=")
			switch {
			case isVar && !vars[name]:
				t.Errorf("%q: the Makefile reads no %s", use, name)
			case !isVar && !targets[w]:
				t.Errorf("%q: %s is not a target `make help` lists", use, w)
			}
		}
	}
}
