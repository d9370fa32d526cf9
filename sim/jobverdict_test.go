package sim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// affected: a pod of a Job whose main fails and whose sidecar a CRR stops,
// the only pods whose Job the controller reads.
func affected(e *podEntry) bool {
	if e.tmpl.JobPolicy == nil {
		return false
	}
	failing, crr := false, false
	for _, c := range e.tmpl.Containers {
		if !c.Sidecar && len(c.ExitCodes) > 0 && c.ExitCodes[len(c.ExitCodes)-1] != 0 {
			failing = true
		}
		for _, env := range c.Env {
			if c.Sidecar && env.Name == decision.EnvTerminate {
				crr = true
			}
		}
	}
	return failing && crr
}

func TestJobReadsOnePerAffectedPodAndNoneElsewhere(t *testing.T) {
	for _, name := range []string{"job-verdict-failjob", "job-verdict-ignore", "job-verdict-swap", "job-verdict-main-rule", "job-never-ignore-exit-code", "normal-image-only", "mixed-cluster"} {
		sc, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		s := New(sc, 1, Options{Pods: 60})
		r := s.Run()
		if r.Violation != nil {
			t.Fatalf("%s: %s", name, r.Violation)
		}
		want, settled := 0, 0
		for _, e := range s.world.byUID {
			if affected(e) {
				want++
			}
			if e.tmpl.JobPolicy != nil && decision.HasSidecarTerminatedCondition(e.obj) && e.obj.Status.Phase == corev1.PodFailed {
				settled++
			}
		}
		if r.JobReads != want {
			t.Errorf("%s: %d Job reads for %d affected pods of %d, want one each", name, r.JobReads, want, len(s.world.byUID))
		}
		t.Logf("%s: %d pods, %d affected, %d Job reads, %d settled for the Job's verdict; writes %v", name, len(s.world.byUID), want, r.JobReads, settled, r.Applied)
	}
}

// Where a rule reads every container and the sidecar has a quick-exit image,
// each pod costs one Job read and one write, the swap: no CRR, no settle;
// and the checker holds the Job's verdict on the swapped pods too.
func TestTheJobsVerdictStopsBySwapWhereARuleReadsTheCRR(t *testing.T) {
	sc, err := Lookup("job-verdict-swap")
	if err != nil {
		t.Fatal(err)
	}
	s := New(sc, 1, Options{Pods: 60})
	r := s.Run()
	if r.Violation != nil {
		t.Fatal(r.Violation)
	}
	pods := len(s.world.byUID)
	if r.Applied[MethodSwap] != pods || r.Applied[MethodCRR] != 0 || r.Applied[MethodSettle] != 0 || r.JobReads != pods {
		t.Errorf("%d pods: writes %v, %d Job reads; want one swap and one Job read each, no CRR, no settle", pods, r.Applied, r.JobReads)
	}
	for _, e := range s.world.byUID {
		for _, cs := range e.obj.Status.ContainerStatuses {
			if cs.Name == "proxy" && (cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0) {
				t.Errorf("pod %s: proxy %+v, want terminated with the quick-exit image's 0", e.obj.Name, cs.State)
			}
		}
	}
}
