package native

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Apply returns a copy of pod converted by the plan: the moved containers
// appended to initContainers, in the plan's order, with restartPolicy Always;
// the annotations that named them as regular containers (the sidecar list
// and the stop order, which the kubelet's order now carries) rid of their
// names; and AnnotationConverted saying what moved and why. A plan that
// converts nothing returns the pod unchanged (the same pointer).
func Apply(pod *corev1.Pod, p Plan) *corev1.Pod {
	if !p.Convert {
		return pod
	}
	out := pod.DeepCopy()
	always := corev1.ContainerRestartPolicyAlways
	moved := map[string]bool{}
	for _, name := range p.InitOrder {
		c := *regular(pod, name).DeepCopy()
		c.RestartPolicy = &always
		out.Spec.InitContainers = append(out.Spec.InitContainers, c)
		moved[name] = true
	}
	out.Spec.Containers = slices.DeleteFunc(out.Spec.Containers, func(c corev1.Container) bool { return moved[c.Name] })
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	for _, key := range []string{decision.AnnotationSidecars, decision.AnnotationStopOrder} {
		if raw, ok := out.Annotations[key]; ok {
			if rest := without(raw, moved); rest == "" {
				delete(out.Annotations, key)
			} else {
				out.Annotations[key] = rest
			}
		}
	}
	all := append(Moved(pod), p.InitOrder...)
	out.Annotations[AnnotationConverted] = fmt.Sprintf("moved %s to initContainers as native sidecars: %s", strings.Join(all, ","), p.Reason)
	return out
}

// Moved reads the containers an earlier conversion of the pod moved, from
// AnnotationConverted: a pod is sent again when a later webhook changed it.
func Moved(pod *corev1.Pod) []string {
	raw, ok := strings.CutPrefix(pod.Annotations[AnnotationConverted], "moved ")
	if !ok {
		return nil
	}
	names, _, _ := strings.Cut(raw, " ")
	return strings.Split(names, ",")
}

func without(list string, drop map[string]bool) string {
	var keep []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" && !drop[n] {
			keep = append(keep, n)
		}
	}
	return strings.Join(keep, ",")
}
