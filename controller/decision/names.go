package decision

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The API server's name generator (k8s.io/apiserver/pkg/storage/names):
// metadata.generateName cut to 58 characters, then 5 characters of this
// alphabet.
const (
	generatedBaseMax   = 58
	generatedSuffixLen = 5
	generatedAlphabet  = "bcdfghjklmnpqrstvwxz2456789"
)

// JobOwned reports whether the pod is a Job's: its controller is a Job and
// the API server generated its name. Such a pod's name is never taken by a
// later pod, so it need not be read live before its CRR. The name alone is
// not enough: a bare pod created with generateName by hand, or a chosen name
// that looks generated, is read first.
func JobOwned(pod *corev1.Pod) bool {
	if !NameGenerated(pod) {
		return false
	}
	for _, r := range pod.OwnerReferences {
		if r.Controller != nil && *r.Controller && r.Kind == "Job" && r.APIVersion == "batch/v1" {
			return true
		}
	}
	return false
}

// NameGenerated reports whether the API server chose the pod's name from its
// metadata.generateName, as it does for every pod of a Job. No later pod
// takes such a name, whereas a chosen name is taken again whenever its owner
// recreates the pod (bare pods, Argo and Tekton steps): only then can a pod
// the cache still shows have been replaced by another of the same name.
func NameGenerated(pod *corev1.Pod) bool {
	base := pod.GenerateName
	if base == "" {
		return false
	}
	if len(base) > generatedBaseMax {
		base = base[:generatedBaseMax]
	}
	suffix, ok := strings.CutPrefix(pod.Name, base)
	if !ok || len(suffix) != generatedSuffixLen {
		return false
	}
	for _, r := range suffix {
		if !strings.ContainsRune(generatedAlphabet, r) {
			return false
		}
	}
	return true
}
