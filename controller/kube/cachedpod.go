package kube

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// cachedPod is how the pod cache holds a pod: the pod as TrimPod leaves it,
// in its protobuf encoding, beside the few fields the informer itself reads
// (its key, its namespace index, its resync check). The API's structs are
// sized for every field a pod may have: a trimmed pod of one main and one
// sidecar keeps 3.8 KB of them alive, its encoding with those fields 1.5 KB
// (BenchmarkCachedPodRetained). At a burst's peak the pods are most of the
// controller's heap (app's BenchmarkBurstHeapHeld).
//
// Every read decodes a new copy (Caches.Pod, the handlers): a few
// microseconds, and no reader can change what the cache holds.
type cachedPod struct {
	// The name, namespace, UID and resourceVersion: what the informer reads.
	objectKeys
	pod []byte
	// considered is decision.Considered of the pod, found once by
	// CachePod: the handlers' filters start with it
	// (reconciler.PodAddMatters, PodUpdateMatters, CRREventMatters), and
	// most events of a burst are answered by it alone, with no decoding.
	considered bool
}

// The informer keys and compares resourceVersions through meta.Accessor,
// which takes a metav1.Object as it is.
var (
	_ metav1.Object  = (*cachedPod)(nil)
	_ runtime.Object = (*cachedPod)(nil)
)

// GetObjectKind and DeepCopyObject make it a runtime.Object, for the parts
// of client-go that check for one (its mutation detector, when turned on).
func (c *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (c *cachedPod) DeepCopyObject() runtime.Object {
	return &cachedPod{objectKeys: c.objectKeys, pod: append([]byte(nil), c.pod...), considered: c.considered}
}

// CachePod is the pod informer's transform: TrimPod, then encoded
// (cachedPod). Anything else passes through.
func CachePod(obj any) (any, error) {
	trimmed, err := TrimPod(obj)
	if err != nil {
		return nil, err
	}
	pod, ok := trimmed.(*corev1.Pod)
	if !ok {
		return trimmed, nil
	}
	data, err := pod.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode pod %s/%s for the cache: %w", pod.Namespace, pod.Name, err)
	}
	return &cachedPod{
		objectKeys: keysOf(pod),
		pod:        data,
		considered: decision.Considered(pod),
	}, nil
}

var podTypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}

// cachedOf is what the pod cache holds, also inside a tombstone.
func cachedOf(obj any) (*cachedPod, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	c, ok := obj.(*cachedPod)
	return c, ok
}

// CachedPod decodes what the pod cache holds (CachePod's answer), also
// inside a tombstone; false for anything else.
func CachedPod(obj any) (*corev1.Pod, bool) {
	pod := &corev1.Pod{}
	if !decodeCached(obj, pod) {
		return nil, false
	}
	return pod, true
}

// lentPods are the update filter's two pods, decoded into again and again
// (decodeCached): the filter reads two versions of every update of a pod
// the decision considers, and a new pair each time was most of the 326 MB
// that reading the cache allocated in a 20,000-pod burst (of 2,134 MB in
// all; e2e/bench's profile). Whoever reads them keeps nothing of them past
// the call (EchoFilter).
var lentPods = sync.Pool{New: func() any { return new([2]corev1.Pod) }}

// decodeCached decodes what the pod cache holds into pod, which may hold
// an earlier decode: its lists' storage is reused, and the result reads
// exactly as a fresh CachedPod (TestADecodeIntoAUsedPodReadsAsAFreshOne).
func decodeCached(obj any, pod *corev1.Pod) bool {
	c, ok := cachedOf(obj)
	if !ok {
		return false
	}
	containers, inits := pod.Spec.Containers[:0], pod.Spec.InitContainers[:0]
	statuses, initStatuses, conditions := pod.Status.ContainerStatuses[:0], pod.Status.InitContainerStatuses[:0], pod.Status.Conditions[:0]
	// The generated Unmarshal merges into what the struct holds (maps,
	// pointers), so all else starts afresh; the lists are appended to.
	*pod = corev1.Pod{}
	pod.Spec.Containers, pod.Spec.InitContainers = containers, inits
	pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.Conditions = statuses, initStatuses, conditions
	if err := pod.Unmarshal(c.pod); err != nil {
		// Bytes this process encoded itself: not expected to fail.
		return false
	}
	// An absent list decodes as nil: so it reads here too.
	pod.Spec.Containers, pod.Spec.InitContainers = nilIfEmpty(pod.Spec.Containers), nilIfEmpty(pod.Spec.InitContainers)
	pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses = nilIfEmpty(pod.Status.ContainerStatuses), nilIfEmpty(pod.Status.InitContainerStatuses)
	pod.Status.Conditions = nilIfEmpty(pod.Status.Conditions)
	// The encoding leaves out the kind, which TrimPod sets (events and
	// `explain` name the object by it).
	pod.TypeMeta = podTypeMeta
	return true
}

func nilIfEmpty[T any](list []T) []T {
	if len(list) == 0 {
		return nil
	}
	return list
}

// AsCached is the pod as a read of the cache returns it: trimmed, encoded
// and decoded. The tests that hold the decision to the cache's copy use it.
func AsCached(pod *corev1.Pod) (*corev1.Pod, error) {
	obj, err := CachePod(pod.DeepCopy())
	if err != nil {
		return nil, err
	}
	out, ok := CachedPod(obj)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s does not decode from the cache", pod.Namespace, pod.Name)
	}
	return out, nil
}
