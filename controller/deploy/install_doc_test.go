package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// documentedWhole are values documented as one row, not key by key: they
// are Kubernetes objects passed through as they are.
var documentedWhole = map[string]bool{"resources": true, "podSecurityContext": true, "securityContext": true, "nodeSelector": true}

func leafKeys(prefix string, m map[string]any, out *[]string) {
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !documentedWhole[key] {
			leafKeys(key, sub, out)
			continue
		}
		*out = append(*out, key)
	}
}

// INSTALL.md's values table lists every value of the chart, and nothing
// the chart does not have.
func TestInstallDocListsEveryValue(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(ChartDir(root), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	var want []string
	leafKeys("", values, &want)
	sort.Strings(want)

	doc, err := os.ReadFile(filepath.Join(root, "controller", "deploy", "INSTALL.md"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z.]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		got = append(got, m[1])
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("INSTALL.md values table\n %v\nvalues.yaml\n %v", got, want)
	}
}
