package kube

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// cachedPodCases are pods with every field TrimPod keeps set.
func cachedPodCases() map[string]*corev1.Pod {
	at := podtest.Epoch
	return map[string]*corev1.Pod{
		"a kubelet's Job pod": kubeletJobPod(7),
		"rules, stages, an init container, a settle, a deletion": podtest.Pod("every-field").OwnedByJob("j").UID("u-1").Node("virtual-1").
			Annotate(decision.AnnotationStopOrder, "proxy:2").Annotate(decision.AnnotationQuickExitImage, "registry.example.com/exit:1").
			Annotate("sidecar-terminator.io/sidecar", "x").
			Init("setup", podtest.Exited(0, at)).
			NativeSidecar("mesh", podtest.Running()).
			Container("main", podtest.Exited(1, at), podtest.Policy(corev1.ContainerRestartPolicyNever),
				podtest.Rule(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)).
			Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvIgnoreExitCode, "true"),
				podtest.Env("KRUISE_TERMINATE_SIDECAR", "1"), podtest.Restarts(2), podtest.Waiting("CrashLoopBackOff", podtest.Int32(137))).
			ConditionAt(decision.ConditionSidecarTerminated, corev1.ConditionTrue, at.Add(time.Minute)).
			Condition(corev1.PodReady, corev1.ConditionFalse).
			Deleting().Build(),
	}
}

// A read of the pod cache gives the pod as TrimPod leaves it, field for
// field, and each read is a copy of its own: a reader that changes it
// changes nothing the next read sees.
func TestACachedPodReadsAsTheTrimmedPod(t *testing.T) {
	for name, pod := range cachedPodCases() {
		t.Run(name, func(t *testing.T) {
			want, err := TrimPod(pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			obj, err := CachePod(pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			got, ok := CachedPod(obj)
			if !ok {
				t.Fatalf("the cache's %T does not read as a pod", obj)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("read from the cache (-trimmed +read):\n%s", cmp.Diff(want, got))
			}
			got.Spec.Containers[0].Image = "changed-by-a-reader"
			again, _ := CachedPod(obj)
			if again.Spec.Containers[0].Image == "changed-by-a-reader" {
				t.Error("a reader's change reached the cache")
			}
			if tomb, ok := CachedPod(cache.DeletedFinalStateUnknown{Key: "k", Obj: obj}); !ok || tomb.Name != pod.Name {
				t.Errorf("a tombstone's pod reads as %v, %v", tomb, ok)
			}
		})
	}
}

// The update filter decodes into the same two pods again and again
// (decodeCached): whatever the pod held before (more containers or fewer,
// annotations, a deletion, statuses), it then reads exactly as a fresh
// read of the cache, nil lists and all.
func TestADecodeIntoAUsedPodReadsAsAFreshOne(t *testing.T) {
	cases := cachedPodCases()
	pods := []*corev1.Pod{cases["a kubelet's Job pod"], cases["rules, stages, an init container, a settle, a deletion"],
		podtest.Pod("bare").Container("main").Build()}
	var cached []any
	for _, p := range pods {
		obj, err := CachePod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, obj)
	}
	used := &corev1.Pod{}
	for _, i := range []int{0, 1, 2, 1, 0, 2, 0} {
		want, _ := CachedPod(cached[i])
		if !decodeCached(cached[i], used) {
			t.Fatalf("pod %d does not decode", i)
		}
		if !reflect.DeepEqual(used, want) {
			t.Fatalf("pod %d decoded into a used pod (-fresh +used):\n%s", i, cmp.Diff(want, used))
		}
	}
}

// The informer keys, indexes and compares the cached pods by their
// namespace, name and resourceVersion.
func TestTheInformerKeysACachedPodByItsName(t *testing.T) {
	pod := kubeletJobPod(3)
	obj, err := CachePod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if want := pod.Namespace + "/" + pod.Name; err != nil || key != want {
		t.Errorf("key %q, %v; want %q", key, err, want)
	}
	ns, err := cache.MetaNamespaceIndexFunc(obj)
	if err != nil || len(ns) != 1 || ns[0] != pod.Namespace {
		t.Errorf("namespace index %v, %v", ns, err)
	}
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := store.Add(obj); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.ByIndex(cache.NamespaceIndex, pod.Namespace); len(got) != 1 {
		t.Errorf("namespace index holds %d pods, want 1", len(got))
	}
	if rv := obj.(*cachedPod).GetResourceVersion(); rv != pod.ResourceVersion {
		t.Errorf("resourceVersion %q, want %q", rv, pod.ResourceVersion)
	}
	if _, ok := CachedPod(pod); ok {
		t.Error("a pod not from the cache read as one")
	}
}

// kubeletJobPodsWire are n kubelet Job pods as the watch sends them.
func kubeletJobPodsWire(tb testing.TB, n int) [][]byte {
	wire := make([][]byte, n)
	for i := range wire {
		data, err := kubeletJobPod(i).Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		wire[i] = data
	}
	return wire
}

func decodePod(data []byte) (any, error) {
	pod := &corev1.Pod{}
	err := pod.Unmarshal(data)
	return pod, err
}

// BenchmarkCachedPodRetained reports the heap a pod keeps alive in the pod
// cache (retained-B/pod), the figure a burst's peak heap grows by per pod:
// 1,344 bytes in 6 objects (1,536 while its keys were a metav1.ObjectMeta),
// where the trimmed *corev1.Pod the cache held before kept 3,845 bytes in
// 17 (docs/measurements.md).
func BenchmarkCachedPodRetained(b *testing.B) {
	wire := kubeletJobPodsWire(b, 10000)
	b.ResetTimer()
	bytes, objects := retainedPerObject(b, b.N, wire, decodePod, CachePod)
	b.ReportMetric(bytes, "retained-B/pod")
	b.ReportMetric(objects, "retained-objects/pod")
}

// The pod cache keeps a Job's pod in little more than a third of what its
// trimmed struct costs: 1,450 bytes bound it, where a trimmed *corev1.Pod
// keeps 3,845, and the encoded pod beside a metav1.ObjectMeta for its keys
// kept 1,536 (the pods are most of a burst's heap).
func TestACachedPodIsKeptSmall(t *testing.T) {
	wire := kubeletJobPodsWire(t, 2000)
	if bytes, _ := retainedPerObject(t, 1, wire, decodePod, CachePod); bytes > 1450 {
		t.Errorf("a cached pod keeps %.0f bytes, want at most 1,450", bytes)
	}
}

// BenchmarkCachedPodRead is what a read of the pod cache costs: one decode.
func BenchmarkCachedPodRead(b *testing.B) {
	obj, err := CachePod(kubeletJobPod(1))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := CachedPod(obj); !ok {
			b.Fatal("no pod")
		}
	}
}

// BenchmarkCachePod is what the informer's transform costs a pod: the trim
// and the encoding.
func BenchmarkCachePod(b *testing.B) {
	data, err := kubeletJobPod(1).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		pod := &corev1.Pod{}
		if err := pod.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
		if _, err := CachePod(pod); err != nil {
			b.Fatal(err)
		}
	}
}
