package decision_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// Considered answers what Classify finds of an eligible pod: a regular
// container marked as a sidecar, or a problem in the marks. It asks
// without building Classify's list, so it is held to Classify's answer on
// pods marked every way, well and badly.
func TestConsideredIsWhatClassifyFindsOfTheMarks(t *testing.T) {
	at := podtest.Epoch
	running := func(name string, opts ...podtest.Option) *podtest.Builder {
		return podtest.Pod(name).Container("main", podtest.Running()).Container("side", append([]podtest.Option{podtest.Running()}, opts...)...)
	}
	pods := map[string]*corev1.Pod{
		"unmarked":               running("a").Build(),
		"marked by env":          running("b", podtest.Env(decision.EnvTerminate, "true")).Build(),
		"marked false":           running("c", podtest.Env(decision.EnvTerminate, "false")).Build(),
		"an invalid env value":   running("d", podtest.Env(decision.EnvTerminate, "yes")).Build(),
		"an env from a field":    running("e", podtest.EnvFrom(decision.EnvTerminate, "metadata.name")).Build(),
		"a quick-exit image":     running("f", podtest.Env(decision.EnvTerminateWithImage, "registry.example.com/exit:1")).Build(),
		"an invalid image":       running("g", podtest.Env(decision.EnvTerminateWithImage, "Not An Image")).Build(),
		"an image too long":      running("h", podtest.Env(decision.EnvTerminateWithImage, strings.Repeat("x", decision.MaxValueLen+1))).Build(),
		"ignore-exit-code alone": running("i", podtest.Env(decision.EnvIgnoreExitCode, "true")).Build(),
		"annotated":              running("j").Annotate(decision.AnnotationSidecars, "side").Build(),
		"annotated unknown name": running("k").Annotate(decision.AnnotationSidecars, "nope").Build(),
		"annotated an init":      running("l").Init("setup", podtest.Exited(0, at)).Annotate(decision.AnnotationSidecars, "setup").Build(),
		"a near-miss env":        running("m", podtest.Env("KRUISE_TERMINATE_SIDECAR", "true")).Build(),
		"a near-miss annotation": running("n").Annotate("sidecar-terminator.io/sidecar", "side").Build(),
		"a native sidecar only":  podtest.Pod("o").NativeSidecar("mesh", podtest.Running()).Container("main", podtest.Running()).Build(),
		"a finished pod":         running("p", podtest.Env(decision.EnvTerminate, "true")).Phase(corev1.PodSucceeded).Build(),
		"no status yet":          podtest.Pod("q").Container("main", podtest.NoStatus()).Container("side", podtest.NoStatus(), podtest.Env(decision.EnvTerminate, "true")).Build(),
	}
	sawBoth := map[bool]bool{}
	for name, pod := range pods {
		containers, problems := decision.Classify(pod, decision.DefaultPolicy())
		want := decision.Eligible(pod) && len(problems) > 0
		for _, c := range containers {
			want = want || decision.Eligible(pod) && c.Role == decision.RoleSidecar
		}
		sawBoth[want] = true
		if got := decision.Considered(pod); got != want {
			t.Errorf("%s: Considered %t, Classify says %t (problems %v)", name, got, want, problems)
		}
	}
	if !sawBoth[true] || !sawBoth[false] {
		t.Errorf("the cases do not cover both answers: %v", sawBoth)
	}
}
