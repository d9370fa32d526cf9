package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A sidecar named by the pod's annotation that has its own image env uses
// that image: the pod's quick-exit annotation is not read for it, so an
// over-long one is no Warning about this sidecar.
func TestAnnotatedSidecarsOwnImageWinsOverTheAnnotation(t *testing.T) {
	huge := DefaultQuickExitRepository + ":" + strings.Repeat("a", MaxValueLen)
	pod := podtest.Pod("p").Annotate(AnnotationSidecars, "log").Annotate(AnnotationQuickExitImage, huge).
		Container("main", exited(0)).Container("log", markImage).Build()
	ctrs, problems := Classify(pod, DefaultPolicy())
	for _, p := range problems {
		if p.Reason == ReasonInvalidQuickExitImage {
			t.Errorf("Warning %s: %s", p.Reason, p.Message)
		}
	}
	for _, c := range ctrs {
		if c.Name == "log" && c.QuickExitImage != quickExit {
			t.Errorf("log's quick-exit image %q, want its own %q", c.QuickExitImage, quickExit)
		}
	}
}

// An allowlist entry without a slash (a Docker Hub short name) is a bare
// repository like any other: any tag of it is allowed, another repository
// is not, and a full reference without a slash allows exactly that image.
func TestAllowlistEntryWithoutASlash(t *testing.T) {
	for _, tc := range []struct {
		image, allowed string
		want           bool
	}{
		{"busybox:1.36", "busybox", true},
		{"docker.io/library/busybox:1.36", "busybox", true},
		{"alpine:3", "busybox", false},
		{"busybox:1.36", "busybox:1.36", true},
		{"busybox:1.37", "busybox:1.36", false},
	} {
		if got := ImageAllowed(tc.image, []string{tc.allowed}); got != tc.want {
			t.Errorf("ImageAllowed(%q, [%q]) = %v, want %v", tc.image, tc.allowed, got, tc.want)
		}
	}
}

// Classify reports whether a container's previous instance ended (the
// kubelet's lastState.terminated).
func TestClassifyReportsAnEarlierTermination(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Running()).
		Container("proxy", markCRR, podtest.Running()).Build()
	pod.Status.ContainerStatuses[1].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137}
	ctrs, _ := Classify(pod, DefaultPolicy())
	got := map[string]bool{}
	for _, c := range ctrs {
		got[c.Name] = c.WasTerminated
	}
	if !got["log"] || got["proxy"] {
		t.Errorf("WasTerminated %v, want log only", got)
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

// A pod is restarting all its containers when a container's status says it
// was stopped for that restart; a container the kubelet reports no status
// for yet does not count either way.
func TestRestartingAllContainersFromAContainersStatus(t *testing.T) {
	restarting := podtest.Pod("p").Container("main", podtest.Exited(137, podtest.Epoch)).Container("log", markCRR, podtest.Running()).Build()
	restarting.Status.ContainerStatuses[0].State.Terminated.Reason = RestartingAllContainersReason
	plain := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.NoStatus()).Build()
	if !RestartingAllContainers(restarting) {
		t.Errorf("a main stopped for the restart: not restarting")
	}
	if RestartingAllContainers(plain) {
		t.Errorf("a main exited 0 beside a sidecar without status: restarting")
	}
}

// A refusal names its status for a person: the HTTP code with its reason
// when the server gave one, the code alone when not, "no answer" without
// one.
func TestRefusalDescribe(t *testing.T) {
	for _, tc := range []struct {
		r    Refusal
		want string
	}{
		{Refusal{Code: 403, Reason: "Forbidden", Message: "denied"}, "HTTP 403 Forbidden: denied"},
		{Refusal{Code: 500, Message: "boom"}, "HTTP 500: boom"},
		{Refusal{Message: "timeout"}, "no answer: timeout"},
	} {
		if got := tc.r.Describe(); got != tc.want {
			t.Errorf("Describe() = %q, want %q", got, tc.want)
		}
	}
}
