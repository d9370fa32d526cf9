// Package promrules checks the chart's PrometheusRule with Prometheus' own
// rule-file parser (the check promtool's "check rules" makes): a module of
// its own, so that the product never builds Prometheus' query engine.
package promrules

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// ruleFile renders the chart with the PrometheusRule on and returns its
// spec as a Prometheus rule file (the spec's groups are that file's).
func ruleFile(t *testing.T) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The repository's root (this module sits three folders down), where
	// the project's pinned helm is built as make test builds it.
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	tool := exec.CommandContext(ctx, "go", "run", "./hack/cmd/tool", "-path", "helm")
	tool.Dir = root
	out, err := tool.Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build helm: %v", err)
		}
		t.Skipf("helm could not be built, rules not checked: %v", err)
	}
	helm := strings.TrimSpace(string(out))
	objs, err := deploy.Template(ctx, helm, deploy.ChartDir(root), "st-test", "--set", "metrics.prometheusRule.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			out, err := yaml.Marshal(o.Object["spec"])
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatal("no PrometheusRule rendered")
	return nil
}

func parse(content []byte) (*rulefmt.RuleGroups, []error) {
	return rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// The chart's rules pass Prometheus' rule parser with unknown fields
// refused (the expressions parse as PromQL, the annotations' templates
// parse), and every metric they select is one the controller exports, with
// the labels they group by.
func TestChartRulesParseAndSelectTheControllersMetrics(t *testing.T) {
	groups, errs := parse(ruleFile(t))
	for _, err := range errs {
		t.Errorf("rule parser: %v", err)
	}
	if len(errs) > 0 {
		return
	}
	labelsOf := exported(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			var grouping []string
			var selected []string
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				switch n := n.(type) {
				case *parser.VectorSelector:
					selected = append(selected, n.Name)
				case *parser.AggregateExpr:
					grouping = append(grouping, n.Grouping...)
				}
				return nil
			})
			for _, name := range selected {
				have, ok := labelsOf[name]
				if ok {
					have = withTargetLabels(have)
				}
				if !ok {
					t.Errorf("%s selects %s, which the controller does not export", r.Alert, name)
					continue
				}
				for _, l := range grouping {
					if !have[l] {
						t.Errorf("%s groups %s by %q, a label it does not have", r.Alert, name, l)
					}
				}
			}
			if len(selected) == 0 {
				t.Errorf("%s selects no metric", r.Alert)
			}
		}
	}
	sort.Strings(alerts)
	if got := strings.Join(alerts, ","); got != "SidecarTerminatorDown,SidecarTerminatorFailedKills,SidecarTerminatorNoLeader,SidecarTerminatorSidecarsOutliveMains" {
		t.Errorf("alerts %s", got)
	}
}

// The parser this test leans on refuses what promtool refuses: a broken
// expression and an unknown field each give an error.
func TestTheRuleParserRefusesBrokenRules(t *testing.T) {
	for name, content := range map[string]string{
		"broken expression": "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sum by (method) (\n",
		"unknown field":     "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    severity: warning\n",
	} {
		if _, errs := parse([]byte(content)); len(errs) == 0 {
			t.Errorf("%s: no error", name)
		}
	}
}

// targetLabels are the labels Prometheus gives every series of a scraped
// target (prometheus-operator's ServiceMonitor: the target's namespace, its
// Service as job, the pod, the endpoint): the alerts group by namespace.
var targetLabels = []string{"namespace", "job", "pod", "service", "instance", "endpoint", "container"}

func withTargetLabels(have map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range have {
		out[k] = true
	}
	for _, l := range targetLabels {
		out[l] = true
	}
	return out
}

// exported gathers the controller's own metrics, each with its label names,
// and the two the rules use from outside the reconciler: Prometheus' `up`
// of each target, and sidecar_terminator_leader, which controller/app
// registers (version.go: newProcessMetrics, unexported) and which its
// tests hold to that name.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	reconciler.NewMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{"up": {}, "sidecar_terminator_leader": {}}
	for _, f := range families {
		ls := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = true
			}
		}
		out[f.GetName()] = ls
	}
	return out
}
