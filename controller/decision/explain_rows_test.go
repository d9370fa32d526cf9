package decision_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// explainRow returns the container table's row for a container.
func explainRow(t *testing.T, out, name string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return l
		}
	}
	t.Fatalf("no row for %s in:\n%s", name, out)
	return ""
}

func explain(t *testing.T, p Plan) string {
	t.Helper()
	var sb strings.Builder
	if err := p.Explain(&sb); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// Each container's row says its own state (a terminated one with its exit
// code, a running one as running), and a sidecar with no way to be stopped
// says "-" for it. No recheck is printed for a plan that waits for nothing.
func TestExplainRowsSayEachContainersOwnState(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(3)).Container("log", markCRR, podtest.Running()).
		Container("odd", podtest.Env(EnvTerminateWithImage, "not-allowed.example.com/x:1"), podtest.Running()).Build()
	out := explain(t, Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()}))
	if r := explainRow(t, out, "main"); !strings.Contains(r, "terminated(3)") {
		t.Errorf("main's row: %q, want terminated(3)", r)
	}
	if r := explainRow(t, out, "log"); strings.Contains(r, "terminated") || !strings.Contains(r, string(StateRunning)) {
		t.Errorf("log's row: %q, want it running", r)
	}
	if f := strings.Fields(explainRow(t, out, "odd")); f[len(f)-1] != "-" {
		t.Errorf("odd's row: %q, want no way to stop it (-)", f)
	}
	done := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, exited(0)).Build()
	if out := explain(t, Decide(Input{Pod: done, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()})); strings.Contains(out, "Recheck") {
		t.Errorf("a plan with no requeue prints a recheck:\n%s", out)
	}
}

// CRRs of equal attempts (one per stop-order stage) keep the order they were
// given in; a CRR with no deadline of its own is held to the pod's.
func TestCRRStatesOrderAndDefaultDeadline(t *testing.T) {
	pod := podtest.Pod("p").UID("u").Node("n").Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("a", markCRR, podtest.Running()).Container("b", markCRR, podtest.Running()).Build()
	crrs := []CRR{
		{Name: "second", Attempt: 1, Containers: []string{"b"}, Phase: "Recreating", Created: podtest.Epoch},
		{Name: "first", Attempt: 1, Containers: []string{"a"}, Phase: "Recreating", Created: podtest.Epoch},
	}
	got := CRRStates(Input{Pod: pod, CRRs: crrs, Now: podtest.Epoch.Add(time.Second), Policy: DefaultPolicy()})
	if len(got) != 2 || got[0].Name != "second" || got[1].Name != "first" {
		t.Fatalf("states %+v, want second then first, as given", got)
	}
	// Deadline 0: the pod's (a minute by default), so one second in it is
	// still being stopped, not a failed kill.
	if !strings.Contains(got[0].Meaning, "kruise-daemon is stopping its containers") {
		t.Errorf("meaning %q, want the kill in progress within the pod's deadline", got[0].Meaning)
	}
}
