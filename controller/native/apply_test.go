package native

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	pt "github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestApplyMovesAfterExistingInitContainersAndRewritesAnnotations(t *testing.T) {
	pod := unscheduled(pt.Pod("p").
		Annotate(decision.AnnotationStopOrder, "shipper,proxy").
		Annotate(decision.AnnotationSidecars, "istio-proxy,shipper").
		Init("setup").
		Container("proxy", pt.Env(terminate, "true")).Container("main").
		Container("shipper", pt.Env(terminate, "true")).Container("istio-proxy"))
	before := pod.DeepCopy()
	p := Decide(pod, []*corev1.Node{newNode}, config())
	got := Apply(pod, p)

	if diff := cmp.Diff(before, pod); diff != "" {
		t.Fatalf("Apply changed its input (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"setup", "proxy", "shipper"}, names(got.Spec.InitContainers)); diff != "" {
		t.Errorf("initContainers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"main", "istio-proxy"}, names(got.Spec.Containers)); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	if got.Spec.InitContainers[0].RestartPolicy != nil {
		t.Errorf("the existing init container got a restart policy")
	}
	for _, c := range got.Spec.InitContainers[1:] {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("moved %s: restartPolicy %v, want Always", c.Name, c.RestartPolicy)
		}
		if c.Image != "example.com/"+c.Name+":1" || len(c.Env) != 1 {
			t.Errorf("moved %s lost its spec: %+v", c.Name, c)
		}
	}
	if _, ok := got.Annotations[decision.AnnotationStopOrder]; ok {
		t.Errorf("stop-order kept after every named sidecar moved: %q", got.Annotations[decision.AnnotationStopOrder])
	}
	if v := got.Annotations[decision.AnnotationSidecars]; v != "istio-proxy" {
		t.Errorf("sidecars annotation = %q, want the name that stayed", v)
	}
	if v := got.Annotations[AnnotationConverted]; !strings.HasPrefix(v, "moved proxy,shipper to initContainers") {
		t.Errorf("%s = %q", AnnotationConverted, v)
	}
	if diff := cmp.Diff([]string{"proxy", "shipper"}, Moved(got)); diff != "" {
		t.Errorf("Moved (-want +got):\n%s", diff)
	}

	// The converted pod reads as the kill path expects: no problem with its
	// marks, the moved sidecars as native ones, and nothing left to convert.
	classified, problems := decision.Classify(got, decision.Policy{})
	if len(problems) != 0 {
		t.Errorf("the converted pod has problems for the kill path: %+v", problems)
	}
	for _, c := range classified {
		if (c.Name == "proxy" || c.Name == "shipper") && c.Role != decision.RoleNativeSidecar {
			t.Errorf("%s is %s after conversion", c.Name, c.Role)
		}
	}
	if again := Decide(got, []*corev1.Node{newNode}, config()); again.Convert {
		t.Errorf("a converted pod converts again: %+v", again)
	}
}

func TestApplyOnReinvocationKeepsEarlierMoves(t *testing.T) {
	pod := unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")))
	first := Apply(pod, Decide(pod, []*corev1.Node{newNode}, config()))
	// A later webhook injects another marked sidecar; the pod is sent again.
	injected := first.DeepCopy()
	injected.Spec.Containers = append(injected.Spec.Containers, corev1.Container{Name: "log",
		Env: []corev1.EnvVar{{Name: terminate, Value: "true"}}})
	second := Apply(injected, Decide(injected, []*corev1.Node{newNode}, config()))
	if diff := cmp.Diff([]string{"proxy", "log"}, names(second.Spec.InitContainers)); diff != "" {
		t.Errorf("initContainers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"proxy", "log"}, Moved(second)); diff != "" {
		t.Errorf("Moved (-want +got):\n%s", diff)
	}
}

func TestApplyWithoutConversionReturnsThePod(t *testing.T) {
	pod := unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")))
	p := Decide(pod, []*corev1.Node{oldNode}, config())
	if got := Apply(pod, p); got != pod {
		t.Errorf("Apply of a plan that converts nothing returned a new pod")
	}
}
