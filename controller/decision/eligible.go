package decision

import corev1 "k8s.io/api/core/v1"

// Eligible reports whether the controller looks at the pod at all (the
// product's "Pods it looks at"): a pod that is not gets VerdictIgnored from
// Decide whatever its node, CRRs, refusals or the time, since that verdict
// reads the pod alone. The informers' update filters use it: an update
// between two versions neither of which is eligible changes no decision.
func Eligible(pod *corev1.Pod) bool {
	_, _, ok := eligible(pod)
	return ok
}
