package decision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// Each CRR phase kruise writes is shown as written, with what it means for
// the pod: above all, a CRR kruise keeps Recreating after its containers
// stopped is a kill done, not one under way.
func TestCRRStatesShowKruisePhaseAndMeaning(t *testing.T) {
	now := podtest.Epoch.Add(10 * time.Second)
	created := podtest.Epoch.Add(2 * time.Second)
	stoppedPod := podtest.Pod("p").UID("u").Node("n").Phase(corev1.PodSucceeded).
		Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("proxy", podtest.Env(EnvTerminate, "true"), podtest.Exited(137, podtest.Epoch.Add(3*time.Second))).Build()
	runningPod := podtest.Pod("p").UID("u").Node("n").
		Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("proxy", podtest.Env(EnvTerminate, "true"), podtest.Running()).Build()
	crr := func(phase string, states ...CRRContainerState) CRR {
		return CRR{Name: "p-u-st1", Attempt: 1, Containers: []string{"proxy"}, Phase: phase, States: states,
			Deadline: time.Minute, Created: created}
	}
	killed := CRRContainerState{Name: "proxy", Phase: "Recreating", Killed: true}
	completed := crr("Completed", CRRContainerState{Name: "proxy", Phase: "Succeeded"})
	completed.Completed = podtest.Epoch.Add(5 * time.Second)
	expired := crr("Completed", killed)
	expired.Completed = created.Add(time.Minute)
	expired.Message = "recreating has exceeded the activeDeadlineSeconds"

	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		crr        CRR
		now        time.Time
		wantPhase  string
		wantStates string
		wantIn     string
	}{
		{"stopped, kruise keeps it Recreating", stoppedPod, crr("Recreating", killed), now,
			"Recreating", "proxy=Recreating(killed)", "the kill is done; kruise keeps it Recreating"},
		{"waits behind another CRR of the pod", runningPod, crr("Pending"), now,
			"Pending", "proxy=-", "works on another ContainerRecreateRequest of this pod first"},
		{"not taken up yet", runningPod, crr(""), now,
			"", "proxy=-", "not yet taken up by kruise-daemon"},
		{"being stopped", runningPod, crr("Recreating", killed), now,
			"Recreating", "proxy=Recreating(killed)", "kruise-daemon is stopping its containers"},
		{"deadline passed, sidecar runs", runningPod, crr("Recreating", killed), created.Add(time.Minute),
			"Recreating", "proxy=Recreating(killed)", "its deadline passed at " + created.Add(time.Minute).UTC().Format(time.RFC3339) + " with proxy not stopped: a failed kill"},
		{"completed, container succeeded", stoppedPod, completed, now,
			"Completed", "proxy=Succeeded", "finished at " + completed.Completed.UTC().Format(time.RFC3339)},
		{"completed by kruise-manager at the deadline", runningPod, expired, created.Add(2 * time.Minute),
			"Completed", "proxy=Recreating(killed)", "kruise says: recreating has exceeded the activeDeadlineSeconds"},
		{"failed container state", stoppedPod, crr("Completed", CRRContainerState{Name: "proxy", Phase: "Failed"}), now,
			"Completed", "proxy=Failed", "finished"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CRRStates(Input{Pod: tc.pod, CRRs: []CRR{tc.crr}, Now: tc.now, Policy: DefaultPolicy()})
			if len(got) != 1 {
				t.Fatalf("got %d states", len(got))
			}
			s := got[0]
			if s.Phase != tc.wantPhase || strings.Join(s.Containers, ",") != tc.wantStates || !strings.Contains(s.Meaning, tc.wantIn) {
				t.Errorf("got phase %q states %v meaning %q\nwant phase %q states %s meaning with %q",
					s.Phase, s.Containers, s.Meaning, tc.wantPhase, tc.wantStates, tc.wantIn)
			}
		})
	}
}

// Explain prints the CRRs under their own heading, oldest attempt first,
// with the phase as kruise wrote it.
func TestExplainListsCRRs(t *testing.T) {
	pod := podtest.Pod("p").UID("u").Node("n").
		Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("proxy", podtest.Env(EnvTerminate, "true"), podtest.Running()).Build()
	in := Input{Pod: pod, Now: podtest.Epoch.Add(time.Minute), Policy: DefaultPolicy(), CRRAPI: true, Node: Node{Name: "n", Found: true},
		CRRs: []CRR{
			{Name: "p-u-st2", Attempt: 2, Containers: []string{"proxy"}, Phase: "Recreating", Created: podtest.Epoch.Add(50 * time.Second), Deadline: time.Minute},
			{Name: "p-u-st1", Attempt: 1, Containers: []string{"proxy"}, Phase: "Completed", Created: podtest.Epoch, Completed: podtest.Epoch.Add(40 * time.Second)},
		}}
	plan := Decide(in)
	plan.CRRs = CRRStates(in)
	var sb strings.Builder
	if err := plan.Explain(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	i1, i2 := strings.Index(out, "p-u-st1  "), strings.Index(out, "p-u-st2  ")
	if !strings.Contains(out, "ContainerRecreateRequests (PHASE and STATES as kruise reports them)") || i1 < 0 || i2 < i1 {
		t.Errorf("CRRs not listed oldest first:\n%s", out)
	}
	if !strings.Contains(out, "Recreating") || !strings.Contains(out, "Completed") {
		t.Errorf("phases missing:\n%s", out)
	}
}
