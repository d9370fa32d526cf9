package decision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The CRRs a later stage's create must not be made beside: each stage up to
// the pod's mark, at its recorded attempt.
func TestEarlierStageCRRsFollowTheMarkAndTheRecordedAttempt(t *testing.T) {
	at := podtest.Epoch.Format(time.RFC3339)
	pod := podtest.Pod("p").Annotate(AnnotationStopStage, "1 "+at).
		Annotate(AnnotationCRRAttempts, AttemptsMark(1, 2)).Build()
	var got []string
	for _, a := range earlierStageCRRs(pod, 2, false) {
		got = append(got, a.CRRName)
	}
	want := []string{StageCRRName(pod, 0, 1), StageCRRName(pod, 1, 2)}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("earlierStageCRRs(mark 1, stage 2) = %v, want %v", got, want)
	}
	// A mark at the stage itself: the stages before it, not the stage's own.
	atTwo := podtest.Pod("p").Annotate(AnnotationStopStage, "2 "+at).Build()
	if got := earlierStageCRRs(atTwo, 2, false); len(got) != 2 || got[1].Stage != 1 {
		t.Errorf("earlierStageCRRs(mark 2, stage 2) = %v, want stages 0 and 1", got)
	}
	if n := len(earlierStageCRRs(podtest.Pod("p").Build(), 2, false)); n != 0 {
		t.Errorf("a pod without a mark: %d CRRs to read, want none", n)
	}
}

func TestLaterStageCRRIsTheNextNamedStageAtItsRecordedAttempt(t *testing.T) {
	ordered := podtest.Pod("p").Annotate(AnnotationStopOrder, " fluent-bit, ,istio-proxy,vector ").
		Annotate(AnnotationCRRAttempts, AttemptsMark(3, 2)).Build()
	cases := []struct {
		name  string
		pod   *corev1.Pod
		stage int
		want  string // "" for none
	}{
		{"stage 1 of three: stage 2's first attempt", ordered, 1, StageCRRName(ordered, 2, 1)},
		{"stage 2 of three: stage 3 at its recorded attempt", ordered, 2, StageCRRName(ordered, 3, 2)},
		{"the last stage: none after it", ordered, 3, ""},
		{"stage 0, the sidecars the order does not name: stage 1 follows", ordered, 0, StageCRRName(ordered, 1, 1)},
		{"no order", podtest.Pod("p").Build(), 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := laterStageCRR(tc.pod, tc.stage)
			got := ""
			if ok {
				got = a.CRRName
				if a.Kind != ActionCreateCRR || a.Stage != tc.stage+1 {
					t.Errorf("action %+v, want a CRR of stage %d", a, tc.stage+1)
				}
			}
			if got != tc.want {
				t.Errorf("laterStageCRR(stage %d) = %q, want %q", tc.stage, got, tc.want)
			}
		})
	}
}
