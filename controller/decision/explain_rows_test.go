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

// A CRR that names no container has stopped nothing: explain shows it as
// kruise-daemon's work in progress, not as a kill done.
func TestCRRWithoutContainersHasNotStoppedAnything(t *testing.T) {
	pod := podtest.Pod("p").UID("u").Node("n").Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("log", markCRR, podtest.Running()).Build()
	got := CRRStates(Input{Pod: pod, Now: podtest.Epoch.Add(time.Second), Policy: DefaultPolicy(),
		CRRs: []CRR{{Name: "empty", Attempt: 1, Phase: "Recreating", Created: podtest.Epoch, Deadline: time.Minute}}})
	if len(got) != 1 || !strings.Contains(got[0].Meaning, "kruise-daemon is stopping its containers") {
		t.Errorf("states %+v, want the stop in progress", got)
	}
}

// explain's stop-order lines: "Waiting" only while later stages wait,
// "Held up" only when a stage ran past its bound, naming those sidecars;
// the CRR table does not cut off what follows it (the second terminator).
func TestExplainStopOrderLinesOnlyWhenTheyApply(t *testing.T) {
	stage := func(next, heldUp []string) Plan {
		return Plan{Verdict: VerdictInProgress, Stage: &StageStatus{Order: []string{"a", "b"}, Stage: 2, Last: 2,
			Stopping: []string{"b"}, Next: next, HeldUp: heldUp}}
	}
	for _, tc := range []struct {
		name   string
		plan   Plan
		want   []string
		absent []string
	}{
		{"last stage, nothing held up", stage(nil, nil), nil, []string{"Waiting:", "Held up:"}},
		{"a stage waits, one held up", stage([]string{"c"}, []string{"a"}), []string{"Waiting:  [c] wait for [b]", "Held up:  [a] ran past"}, nil},
		{"second terminator after the CRRs", Plan{Verdict: VerdictInProgress,
			CRRs:             []CRRState{{Name: "p-u-st1", Attempt: 1, Phase: "Pending", Containers: []string{"log=-"}, Meaning: "waits"}},
			SecondTerminator: &SecondTerminator{CRR: "kruise-crr", Containers: []string{"log"}}},
			[]string{"p-u-st1", "Second terminator:", "kruise-crr"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := explain(t, tc.plan)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("%q in:\n%s", a, out)
				}
			}
		})
	}
}
