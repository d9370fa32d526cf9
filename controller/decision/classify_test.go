package decision_test

import (
	"strings"
	"testing"

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
func TestAnAllowlistEntryWithoutASlashIsABareRepository(t *testing.T) {
	for _, tc := range []struct {
		image, allowed string
		want           bool
	}{
		{"busybox:1.36", "busybox", true},
		{"docker.io/library/busybox:1.36", "busybox", true},
		{"alpine:3", "busybox", false},
		{"busybox:1.36", "busybox:1.36", true},
		{"busybox:1.37", "busybox:1.36", false},
		{"docker.io/library/busybox:1.36", "busybox:1.36", true},
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
