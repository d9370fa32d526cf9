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

// Considered reports whether the decision reads more of the pod than its
// marks: it is eligible, and a regular container is marked as a sidecar or
// the marks raise a problem (a near miss, an invalid value, an unknown
// name). A pod not considered gets VerdictIgnored or VerdictNoSidecars from
// Decide, with no problem and no action, whatever its status, node, CRRs
// or the time: decide returns before reading them (its plan may still ask
// for a read-only look for OpenKruise's CRR when one of ours is Pending,
// which changes nothing for a pod with no sidecar marked). The
// informers' filters drop its adds, updates and CRR events on that ground.
// Most Job pods are such, since most Jobs carry no sidecar: in e2e/bench's
// side-by-side burst the yardstick's unmarked half was 24,999 of the
// controller's 52,646 syncs before this filter.
func Considered(pod *corev1.Pod) bool {
	if !Eligible(pod) {
		return false
	}
	// Classify's answer on roles and problems, without the list of every
	// container and its status it builds: the informer asks this of every
	// pod event (kube.CachePod). Init containers are never RoleSidecar and
	// raise no problem.
	listed, problems := annotatedSidecars(pod)
	if len(problems) > 0 || len(nearMisses(pod)) > 0 {
		return true
	}
	policy := DefaultPolicy()
	for i, c := range pod.Spec.Containers {
		ctr, problems := classifyRegular(pod, i, c, listed[c.Name], policy)
		if len(problems) > 0 || ctr.Role == RoleSidecar {
			return true
		}
	}
	return false
}
