package reconciler

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// swapPatch replaces sidecar images. It is guarded by test ops: on the pod's
// UID, so that it can never land on a new pod that took the old one's name
// while the cache still showed the old; and on each container's name and
// current image, so that an image someone else changed in the meantime, or a
// reordered container list, fails the whole patch instead of being overwritten.
//
// stageMark, when set, is recorded in the pod's stop-stage annotation by the
// same patch, as a compare-and-swap on the value read: another replica's
// later mark is never moved back.
func swapPatch(pod *corev1.Pod, swaps []decision.Swap, stageMark string) ([]byte, error) {
	ops := []jsonPatchOp{{Op: "test", Path: "/metadata/uid", Value: pod.UID}}
	for _, s := range swaps {
		base := fmt.Sprintf("/spec/containers/%d", s.Index)
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: base + "/name", Value: s.Container},
			jsonPatchOp{Op: "test", Path: base + "/image", Value: s.From},
			jsonPatchOp{Op: "replace", Path: base + "/image", Value: s.To})
	}
	if stageMark != "" {
		ops = append(ops, annotationOps(pod, decision.AnnotationStopStage, stageMark)...)
	}
	return json.Marshal(ops)
}

// annotationPatch sets one annotation of the pod by compare-and-swap: guarded
// by the pod's UID and by the annotation's value as read. noMap: the pod has
// no annotations at all, and the patch adds the map (guarded by a test that
// there is none) rather than one key of it.
func annotationPatch(pod *corev1.Pod, key, value string, noMap bool) ([]byte, error) {
	ops := []jsonPatchOp{{Op: "test", Path: "/metadata/uid", Value: pod.UID}}
	if noMap {
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: "/metadata/annotations", Value: nil},
			jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{key: value}})
		return json.Marshal(ops)
	}
	return json.Marshal(append(ops, annotationOps(pod, key, value)...))
}

// annotationOps set the annotation to value if it still holds what the pod
// read shows: the old value, or none (a test of null passes on a member that
// is absent, as the API server's JSON patch applies it). The pod's
// annotations map must exist.
func annotationOps(pod *corev1.Pod, key, value string) []jsonPatchOp {
	path := "/metadata/annotations/" + jsonPointerEscape(key)
	if old, ok := pod.Annotations[key]; ok {
		return []jsonPatchOp{{Op: "test", Path: path, Value: old}, {Op: "replace", Path: path, Value: value}}
	}
	return []jsonPatchOp{{Op: "test", Path: path, Value: nil}, {Op: "add", Path: path, Value: value}}
}

// settlePatch sets a terminal phase and the SidecarTerminated condition,
// guarded by tests of the pod's UID and of the phase the decision saw.
func settlePatch(pod *corev1.Pod, phase corev1.PodPhase, now time.Time) ([]byte, error) {
	cond := corev1.PodCondition{
		Type:               decision.ConditionSidecarTerminated,
		Status:             corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             "MainContainersDone",
		Message:            "the main containers are done; the phase was settled before stopping the ignore-exit-code sidecars",
	}
	ops := []jsonPatchOp{
		{Op: "test", Path: "/metadata/uid", Value: pod.UID},
		{Op: "test", Path: "/status/phase", Value: pod.Status.Phase},
		{Op: "replace", Path: "/status/phase", Value: phase},
	}
	// Conditions are a map keyed by type: a re-settle (the kubelet wrote its
	// own phase back over ours) replaces our condition, guarded by a test of
	// its type at that index, and so restarts the grace wait that reads its
	// transition time. A second condition of the same type would leave the
	// wait reading the first one's time.
	switch i := conditionIndex(pod, decision.ConditionSidecarTerminated); {
	case i >= 0:
		path := fmt.Sprintf("/status/conditions/%d", i)
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: path + "/type", Value: decision.ConditionSidecarTerminated},
			jsonPatchOp{Op: "replace", Path: path, Value: cond})
	case len(pod.Status.Conditions) == 0:
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/status/conditions", Value: []corev1.PodCondition{cond}})
	default:
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/status/conditions/-", Value: cond})
	}
	return json.Marshal(ops)
}

func conditionIndex(pod *corev1.Pod, t corev1.PodConditionType) int {
	for i, c := range pod.Status.Conditions {
		if c.Type == t {
			return i
		}
	}
	return -1
}

// jsonPointerEscape escapes a map key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
