package decision

import corev1 "k8s.io/api/core/v1"

// StopOrder is the pod's stop-order annotation as the kill path reads it: the
// named sidecars, first stopped first, or nil with a Problem when the order
// is unusable. The native-sidecar conversion reads the order through it, so
// the annotation has one reader.
func StopOrder(pod *corev1.Pod, containers []Container) ([]string, *Problem) {
	return stopOrder(pod, containers)
}
