package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// What a plan asks to read live before its writes (Plan.Confirm), by the
// assumption each write rests on. The happy path asks for nothing, ordered
// pods included, for a memory that watched the pod since before its mains
// were done.
func TestAPlanConfirmsOnlyWhatItsInputCannotVouchFor(t *testing.T) {
	one := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build()
	withImage := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	ordered := podtest.Pod("p").Annotate(AnnotationStopOrder, "a,b,c").Container("main", exited(0)).
		Container("a", markCRR, podtest.Exited(0, exitAt.Add(time.Second))).Container("b", markCRR).Container("c", markCRR).Build()
	orderedFirst := podtest.Pod("p").Annotate(AnnotationStopOrder, "a,b").Container("main", exited(0)).
		Container("a", markCRR).Container("b", markCRR).Build()
	later := now.Add(5 * time.Minute)
	settled := podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
		Container("main", exited(0)).Container("log", markCRR, ignoreRC).Build()
	settledSwap := podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
		Container("main", exited(0)).Container("log", markImage, ignoreRC).Build()
	watched := t0 // the memory began before the mains were done
	stage1 := crrOfStage(1, 1, "Recreating", exitAt.Add(time.Second), "a")
	deletedHeldUp := stage1
	deletedHeldUp.Unseen, deletedHeldUp.Deleted, deletedHeldUp.Phase = true, true, "Completed"
	failed := crrOfStage(0, 1, "Completed", exitAt.Add(time.Second), "log")
	failed.Completed = exitAt.Add(2 * time.Second)
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		in   func(*Input)
		want []string // CRR names, then "pod" and "job:<name>" where asked
	}{
		"the happy path: a first CRR": {pod: one, in: func(in *Input) { in.WatchedSince = watched }},
		"the happy path of an ordered pod, watched from the start: nothing": {
			pod: ordered, in: func(in *Input) { in.WatchedSince, in.CRRs = watched, []CRR{stage1} }},
		"the same, by a memory that began after the mains: the next stage's CRR": {
			pod: ordered, in: func(in *Input) { in.WatchedSince, in.CRRs = now, []CRR{stage1} },
			want: []string{StageCRRName(ordered, 3, 1)}},
		"an ordered pod's first stage, by a memory that began after the mains: the next stage's CRR": {
			pod: orderedFirst, in: func(in *Input) { in.WatchedSince = now },
			want: []string{StageCRRName(orderedFirst, 2, 1)}},
		"a stage's CRR deleted while its sidecars ran (held up): read before the next": {
			pod: podtest.Pod("p").Annotate(AnnotationStopOrder, "a,b").Container("main", exited(0)).
				Container("a", markCRR).Container("b", markCRR).Build(),
			in:   func(in *Input) { in.Now, in.WatchedSince, in.CRRs = later, watched, []CRR{deletedHeldUp} },
			want: []string{deletedHeldUp.Name}},
		"a stage's CRR deleted once its sidecars stopped: nothing": {
			pod: ordered, in: func(in *Input) { in.WatchedSince, in.CRRs = watched, []CRR{deletedHeldUp} }},
		"a retry whose first attempt the input has: the live pod only (a correction)": {
			pod: one, in: func(in *Input) { in.Now, in.WatchedSince, in.CRRs = later, watched, []CRR{failed} },
			want: []string{"pod"}},
		"a create that got no answer, sent again: itself": {
			pod: one, in: func(in *Input) {
				in.Now, in.WatchedSince = later, watched
				in.Refusals = []Refusal{{Kind: ActionCreateCRR, CRRName: CRRName(one, 1), Attempt: 1, Containers: []string{"log"}, MaybeApplied: true, Count: 1, At: now}}
			},
			want: []string{CRRName(one, 1)}},
		"a swap after a refused CRR: the refused CRR": {
			pod: withImage, in: func(in *Input) {
				in.WatchedSince = watched
				r := Refusal{Kind: ActionCreateCRR, CRRName: CRRName(withImage, 1), Attempt: 1, Containers: []string{"log"}, Code: 403, Permanent: true, Permanents: 1, Count: 1, At: now}
				in.Refusals = []Refusal{r}
				in.RefusedCRRs = []Action{{Kind: ActionCreateCRR, CRRName: r.CRRName, Attempt: 1, Containers: []string{"log"}}}
			},
			want: []string{CRRName(withImage, 1), "pod"}},
		"an overdue swap: the pod": {
			pod: one, in: func(in *Input) {
				in.WatchedSince = watched
				in.Overdue = []Action{swapOf(1, "log", img("log"))}
			},
			want: []string{"pod"}},
		"a stop of a settled pod's sidecar past the kubelet's grace: the pod, whose phase the kubelet may have written back": {
			pod: settled, in: func(in *Input) { in.Now, in.WatchedSince = later, watched },
			want: []string{"pod"}},
		"the same by image swap: the pod": {
			pod: settledSwap, in: func(in *Input) { in.Node, in.Now, in.WatchedSince = virtual, later, watched },
			want: []string{"pod"}},
		"the same on the pod read live: nothing more": {
			pod: settled, in: func(in *Input) { in.Now, in.WatchedSince, in.PodLive = later, watched, true }},
		"a settled pod within the kubelet's grace: nothing": {
			pod: settled, in: func(in *Input) { in.WatchedSince = watched }},
		"a name read already in this sync: not again": {
			pod: orderedFirst, in: func(in *Input) { in.WatchedSince, in.ReadLive = now, []string{StageCRRName(orderedFirst, 2, 1)} }},
	} {
		t.Run(name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()}
			tc.in(&in)
			c := Decide(in).Confirm
			var got []string
			for _, r := range c.CRRs {
				got = append(got, r.Create.CRRName)
			}
			if c.Pod {
				got = append(got, "pod")
			}
			if c.Job != "" {
				got = append(got, "job:"+c.Job)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("confirm %v, want %v", got, tc.want)
			}
		})
	}
}
