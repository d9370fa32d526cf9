package deploy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// installBlock is the README's install block: "## Install on a cluster" up
// to its first subsection.
func installBlock(t *testing.T, root string) string {
	t.Helper()
	section := readmeSection(t, root, "## Install on a cluster")
	if i := strings.Index(section, "\n### "); i >= 0 {
		section = section[:i]
	}
	return section
}

// kruiseVersion is the OpenKruise the local cluster and the suites run
// (e2e/cluster.KruiseVersion), without its v.
func kruiseVersion(t *testing.T, root string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "e2e", "cluster", "build.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`KruiseVersion\s*=\s*"v([0-9.]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("e2e/cluster/build.go no longer pins KruiseVersion as this test reads it")
	}
	return string(m[1])
}

// The README's install block, as written: `make push REGISTRY=...`, then
// the helm install of the chart make push pushes (REGISTRY/charts, at the
// version make push gives it by default: the chart's), `helm test` of that
// release, and OpenKruise at the version the suites run, its own
// SidecarTerminator off, with the feature gates kind/up.sh sets; kind/up.sh
// asks for the same version. Each --set the prose shows names values the
// chart has and renders. The block has no dates or commit hashes and fits
// in 45 lines.
func TestReadmeInstallCommandsMatchTheChart(t *testing.T) {
	root := repoRoot(t)
	block := installBlock(t, root)
	if n := strings.Count("## Install on a cluster"+block, "\n"); n > 45 {
		t.Errorf("the install block has %d lines, want at most 45", n)
	}
	if m := regexp.MustCompile(`\b20[0-9]{2}-[0-9]{2}(-[0-9]{2})?\b|\b[0-9a-f]{7,40}\b`).FindString(block); m != "" {
		t.Errorf("the install block carries a date or a commit hash: %q", m)
	}
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
	kindGates := regexp.MustCompile(`--set '(featureGates=[^']*)'`).FindSubmatch(upSh)
	if kindGates == nil || !strings.Contains(string(upSh), `KRUISE_CHART_VERSION="${KRUISE_CHART_VERSION:-$KRUISE_VERSION}"`) {
		t.Fatal("kind/up.sh no longer asks for OpenKruise's chart at the pinned KruiseVersion with feature gates as this test reads them")
	}
	kruise := kruiseVersion(t, root)
	if !strings.Contains(block, "OpenKruise v"+kruise) {
		t.Errorf("the install block does not recommend OpenKruise v%s, the version the suites run", kruise)
	}
	if n := len(regexp.MustCompile(`OpenKruise v?[0-9]+\.[0-9]+`).FindAllString(block, -1)); n != 1 {
		t.Errorf("the install block names an OpenKruise version %d times, want once", n)
	}
	chart := readChartVersion(t, root)

	var registry string
	pushes, installs, tests, kruises := 0, 0, 0, 0
	for _, cmd := range readme.ShellCommands(block) {
		words := shellWords(cmd)
		switch {
		case len(words) == 3 && words[0] == "make" && words[1] == "push" && strings.HasPrefix(words[2], "REGISTRY="):
			pushes++
			registry = strings.TrimPrefix(words[2], "REGISTRY=")
		case len(words) >= 4 && words[0] == "helm" && words[1] == "install" && words[2] == "kruise":
			kruises++
			if v := flagValues(words, "--version"); len(v) != 1 || v[0] != kruise {
				t.Errorf("%q: OpenKruise chart version %v, the suites run %s", cmd, v, kruise)
			}
			if s := flagValues(words, "--set"); len(s) != 1 || s[0] != strings.ReplaceAll(string(kindGates[1]), `\,`, ",") && s[0] != string(kindGates[1]) {
				t.Errorf("%q: --set %v, kind/up.sh sets %s", cmd, s, kindGates[1])
			} else if !strings.Contains(s[0], "SidecarTerminator=false") {
				t.Errorf("%q: OpenKruise's own SidecarTerminator is not turned off", cmd)
			}
		case len(words) >= 4 && words[0] == "helm" && words[1] == "install" && words[2] == ReleaseName:
			installs++
			if want := "oci://" + registry + "/charts/" + ReleaseName; registry == "" || words[3] != want {
				t.Errorf("%q installs %s, not the chart `make push REGISTRY=%s` pushes (%s)", cmd, words[3], registry, want)
			}
			if v := flagValues(words, "--version"); len(v) != 1 || v[0] != chart {
				t.Errorf("%q: --version %v, make push pushes the chart's version %s", cmd, v, chart)
			}
			if ns := flagValues(words, "--namespace"); len(ns) != 1 || ns[0] != Namespace || !slices.Contains(words, "--create-namespace") {
				t.Errorf("%q: want --namespace %s --create-namespace", cmd, Namespace)
			}
		case len(words) >= 3 && words[0] == "helm" && words[1] == "test" && words[2] == ReleaseName:
			tests++
			if ns := flagValues(words, "--namespace"); len(ns) != 1 || ns[0] != Namespace {
				t.Errorf("%q: want --namespace %s", cmd, Namespace)
			}
		default:
			t.Errorf("the install block runs %q, which this test does not check: add it here", cmd)
		}
	}
	if pushes != 1 || installs != 1 || tests != 1 || kruises != 1 {
		t.Errorf("found %d make push, %d chart installs, %d helm tests and %d OpenKruise installs: the block changed shape", pushes, installs, tests, kruises)
	}
	// The allowlist the block shows as the default is the quick-exit
	// repository make push pushes.
	if want := registry + "/sidecar-terminator/quick-exit"; !strings.Contains(block, "`"+want+"`") {
		t.Errorf("the block does not name %s as the default allowed quick-exit image", want)
	}
	// --set examples given in the prose.
	prose := regexp.MustCompile("`(--set '[^`]*')`|`(--set [^`' ]*)`").FindAllStringSubmatch(block, -1)
	if len(prose) == 0 {
		t.Error("no --set examples in the prose: the block changed shape")
	}
	for _, m := range prose {
		set := flagValues(shellWords(m[1]+m[2]), "--set")
		var args []string
		for _, s := range set {
			key, _, _ := strings.Cut(s, "=")
			if !hasValue(values, key) {
				t.Errorf("--set %s: the chart has no value %q", s, key)
			}
			args = append(args, "--set", strings.NewReplacer("MIRROR", "mirror.example.com").Replace(s))
		}
		objs, err := Template(context.Background(), helmBinary(t), ChartDir(root), Namespace, args...)
		if err != nil {
			t.Errorf("%v: the chart does not render: %v", args, err)
			continue
		}
		only(t, objs, "Deployment")
	}
}

// readChartVersion is the chart's version in Chart.yaml.
func readChartVersion(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(ChartDir(root), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Version string }
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m.Version
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
