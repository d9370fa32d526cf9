package docs

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	alertRE   = regexp.MustCompile(`(?m)^\s*-?\s*alert:\s*(\S+)`)
	runbookRE = regexp.MustCompile(`observability\.md#([a-z0-9_-]+)`)
)

// Every alert the chart ships has a runbook: a heading of its own in
// docs/observability.md's Alerts section, at the anchor its runbook_url
// names.
func TestEveryAlertHasARunbook(t *testing.T) {
	r := root(t)
	rules := read(t, filepath.Join(r, "controller", "deploy", "chart", "sidecar-terminator", "templates", "prometheusrule.yaml"))
	doc := read(t, filepath.Join(r, "docs", "observability.md"))
	alerts := alertRE.FindAllStringSubmatch(rules, -1)
	if len(alerts) < 2 {
		t.Fatalf("found %d alerts in the chart's prometheusrule.yaml: it changed shape", len(alerts))
	}
	section := doc[strings.Index(doc, "\n## Alerts\n")+1:]
	if i := strings.Index(section[1:], "\n## "); i >= 0 {
		section = section[:i+1]
	}
	for _, a := range alerts {
		if !strings.Contains(section, "\n### "+a[1]+"\n") {
			t.Errorf("the chart's alert %s has no \"### %s\" heading under docs/observability.md's \"## Alerts\"", a[1], a[1])
		}
	}
	anchors := Anchors(doc)
	for _, m := range runbookRE.FindAllStringSubmatch(rules, -1) {
		if !anchors[m[1]] {
			t.Errorf("a runbook_url points at docs/observability.md#%s, which is no heading there", m[1])
		}
	}
}
