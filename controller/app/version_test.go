package app

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

func TestVersionFlagPrintsTheBuild(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := "sidecar-terminator " + version + " (revision "
	if got := out.String(); !strings.HasPrefix(got, want) || !strings.Contains(got, runtime.Version()) {
		t.Errorf("--version printed %q, want a line starting %q naming %s", got, want, runtime.Version())
	}
}

func TestBuildInfoAndLeaderMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := BuildInfo{Version: "v9.9.9", Revision: "abc", GoVersion: "go1.x"}
	m := newProcessMetrics(reg, b)
	want := `
# HELP sidecar_terminator_build_info Always 1; its labels name the running binary.
# TYPE sidecar_terminator_build_info gauge
sidecar_terminator_build_info{go_version="go1.x",revision="abc",version="v9.9.9"} 1
# HELP sidecar_terminator_leader 1 while this replica acts (holds the leader Lease, or runs without leader election), else 0.
# TYPE sidecar_terminator_leader gauge
sidecar_terminator_leader 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	m.leader.Set(1)
	if got := testutil.ToFloat64(m.leader); got != 1 {
		t.Errorf("leader = %v after Set(1)", got)
	}
}

// Flags render in --help with one default each and no made-up argument
// names (pflag takes a `quoted` word in a usage string as the argument's
// name, so a boolean flag looked as if it took one).
func TestHelpRendersFlagsPlainly(t *testing.T) {
	cmd := NewCommand()
	usage := cmd.Flags().FlagUsages()
	for _, line := range strings.Split(usage, "\n") {
		if strings.Contains(line, "--profiling") && !strings.HasPrefix(strings.TrimSpace(line), "--profiling  ") {
			t.Errorf("--profiling renders as taking an argument: %q", line)
		}
		if strings.Count(line, "default") > 1 {
			t.Errorf("flag shows more than one default: %q", line)
		}
	}
}

func TestLeaseNamespaceResolution(t *testing.T) {
	o := DefaultOptions()
	t.Setenv("POD_NAMESPACE", "")
	if got := o.leaseNamespace(); got != defaultLeaseNamespace {
		t.Errorf("no flag, no env: %q", got)
	}
	t.Setenv("POD_NAMESPACE", "from-env")
	if got := o.leaseNamespace(); got != "from-env" {
		t.Errorf("env: %q", got)
	}
	o.LeaderElectNamespace = "from-flag"
	if got := o.leaseNamespace(); got != "from-flag" {
		t.Errorf("flag: %q", got)
	}
}

// The metrics table (docs/observability.md, linked from the README) names
// every sidecar_terminator_* metric the controller serves.
func TestDocsListEveryMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	reconciler.NewMetrics(reg)
	newProcessMetrics(reg, Build())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "sidecar_terminator_") && !strings.Contains(string(readme), "| `"+f.GetName()+"` |") {
			t.Errorf("docs/observability.md's metrics table has no row for %s", f.GetName())
		}
	}
}
