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
	for _, name := range []string{"job-verdict-failjob", "job-verdict-ignore", "job-verdict-main-rule", "job-never-ignore-exit-code", "normal-image-only", "mixed-cluster"} {
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
		t.Logf("%s: %d pods, %d affected, %d Job reads, %d settled for the Job's verdict", name, len(s.world.byUID), want, r.JobReads, settled)
	}
}
