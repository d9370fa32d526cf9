package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
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

func installDoc(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "controller", "deploy", "INSTALL.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// INSTALL.md's permissions table is what the code calls and the chart
// grants (kube.Permissions, which TestRBACEqualsWhatTheCodeNeeds holds the
// chart to): every resource with exactly its verbs.
func TestInstallDocListsThePermissionsGranted(t *testing.T) {
	doc := installDoc(t)
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| (core|`[a-z0-9.]+`) \\| `([a-z/]+)`[^|]* \\| ([a-z, ]+) \\|").FindAllStringSubmatch(doc, -1) {
		group := strings.Trim(m[1], "`")
		if group == "core" {
			group = ""
		}
		rows[group+"/"+m[2]] = m[3]
	}
	for _, p := range kube.Permissions {
		key := p.Group + "/" + p.Resource
		if got, want := rows[key], strings.Join(p.Verbs, ", "); got != want {
			t.Errorf("INSTALL.md lists %s with verbs %q, the chart grants %q", key, got, want)
		}
		delete(rows, key)
	}
	for k := range rows {
		t.Errorf("INSTALL.md lists %s, which the controller is not granted", k)
	}
}

// Upgrade and rollback as they work: --reset-then-reuse-values (never
// --reuse-values, which keeps the old chart's defaults), helm rollback,
// what happens to running Jobs, and the PDB's real role.
func TestInstallDocUpgradeAndRollback(t *testing.T) {
	doc := installDoc(t)
	for _, want := range []string{"--reset-then-reuse-values", "helm rollback sidecar-terminator", "level-triggered", "voluntary evictions", "helm test sidecar-terminator"} {
		if !strings.Contains(doc, want) {
			t.Errorf("INSTALL.md lacks %q", want)
		}
	}
	if regexp.MustCompile(`helm upgrade[^\n]*(\\\n[^\n]*)*--reuse-values`).MatchString(doc) {
		t.Error("INSTALL.md upgrades with --reuse-values")
	}
}

// Every relative link of INSTALL.md names a file of the repository (and a
// heading of it, where it names one).
func TestInstallDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "controller", "deploy")
	for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(installDoc(t), -1) {
		target := filepath.Join(dir, m[1])
		raw, err := os.ReadFile(target)
		if err != nil {
			t.Errorf("link %s: %v", m[0], err)
			continue
		}
		if anchor := strings.TrimPrefix(m[2], "#"); anchor != "" && !hasHeading(string(raw), anchor) {
			t.Errorf("link %s: %s has no heading #%s", m[0], m[1], anchor)
		}
	}
}

// hasHeading reports whether markdown has a heading whose GitHub anchor is
// anchor.
func hasHeading(markdown, anchor string) bool {
	for _, m := range regexp.MustCompile(`(?m)^#+ (.*)$`).FindAllStringSubmatch(markdown, -1) {
		a := strings.ToLower(strings.TrimSpace(m[1]))
		a = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(a, "")
		if strings.ReplaceAll(a, " ", "-") == anchor {
			return true
		}
	}
	return false
}
