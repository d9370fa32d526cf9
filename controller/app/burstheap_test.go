package app

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// burstExit is when the burst's mains exit.
var burstExit = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// burstPod is the i-th pod of the scale bench's burst (e2e/bench/pods.go)
// as the API server sends it once its main has exited: generated name,
// server-set metadata and defaults, the status the bench writes. Even pods
// run on the normal node with the CRR mark, odd ones on a virtual node with
// an image.
func burstPod(i int) *corev1.Pod {
	node, env := "bench-normal", corev1.EnvVar{Name: decision.EnvTerminate, Value: "true"}
	if i%2 == 1 {
		node, env = fmt.Sprintf("bench-virtual-%d", i/2%2+1), corev1.EnvVar{Name: decision.EnvTerminateWithImage, Value: "ghcr.io/sidecar-terminator/quick-exit:dev"}
	}
	name := fmt.Sprintf("ctl1-%05x", i)
	at := metav1.NewTime(burstExit)
	container := func(name, image string, env []corev1.EnvVar) corev1.Container {
		return corev1.Container{Name: name, Image: image, Env: env, ImagePullPolicy: corev1.PullIfNotPresent,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}
	}
	managed := func(manager, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at,
			FieldsType: "FieldsV1", Subresource: sub, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:bench-run":{}},"f:ownerReferences":{}},"f:spec":{"f:containers":{}}}`)}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: "ctl1-", Namespace: "default",
			UID:             types.UID(fmt.Sprintf("6c1f2a3b-8d4e-4f5a-9b6c-%012d", i)),
			ResourceVersion: fmt.Sprint(2000000 + 3*i), CreationTimestamp: at, Labels: map[string]string{"bench-run": "ctl1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "ctl1", UID: "bench-job-ctl1", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{managed("bench.test", ""), managed("bench.test", "status")}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName, SecurityContext: &corev1.PodSecurityContext{},
			Containers: []corev1.Container{container("main", "example.com/batch:1", nil), container("sidecar", "example.com/log-shipper:1", []corev1.EnvVar{env})}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "main", Image: "example.com/batch:1", ContainerID: "containerd://" + name + "-main",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: at}}},
			{Name: "sidecar", Image: "example.com/log-shipper:1", ContainerID: "containerd://" + name + "-sidecar",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}},
		}},
	}
}

// crrCacheWriter writes nothing; a CRR it is given goes into the CRR
// informer's store as the informer would put it there (decoded from JSON,
// as the kruise client speaks it, and transformed).
type crrCacheWriter struct{ store cache.Store }

func (w crrCacheWriter) CreateCRR(_ context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, _ bool) error {
	data, err := json.Marshal(crr)
	if err != nil {
		return err
	}
	seen := &kruisev1alpha1.ContainerRecreateRequest{}
	if err := json.Unmarshal(data, seen); err != nil {
		return err
	}
	seen.ResourceVersion, seen.CreationTimestamp = "3000000", metav1.NewTime(burstExit)
	obj, _ := kube.TrimCRR(seen)
	return w.store.Add(obj)
}
func (crrCacheWriter) DeleteCRR(context.Context, string, string) error              { return nil }
func (crrCacheWriter) PatchPod(context.Context, string, string, []byte) error       { return nil }
func (crrCacheWriter) PatchPodStatus(context.Context, string, string, []byte) error { return nil }
func (crrCacheWriter) AnnotatePod(context.Context, string, string, types.UID, string, string) error {
	return nil
}

// liveHeap is the heap in use once the garbage collector has run.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkBurstHeapHeld builds what a 20,000-pod burst of the scale bench
// leaves in the controller's memory at its peak, from the controller's own
// parts, and reports each part's live heap in MiB: the trimmed pod cache,
// the reconciler's memory of each pod, the CRR cache (half the pods get a
// CRR), the events held back while the controller is busy, and what the
// event correlators remember once they are written. Run it once:
//
//	go test -p 1 -run '^$' -bench BurstHeapHeld -benchtime 1x ./controller/app/
func BenchmarkBurstHeapHeld(b *testing.B) {
	const pods = 20000
	for range b.N {
		parts := burstHeap(b, pods)
		total := 0.0
		for _, p := range parts {
			b.ReportMetric(p.mib, p.name+"-MiB")
			total += p.mib
		}
		b.ReportMetric(total, "total-MiB")
	}
}

type heapPart struct {
	name string
	mib  float64
}

func burstHeap(tb testing.TB, pods int) []heapPart {
	mib := func(from, to uint64) float64 { return (float64(to) - float64(from)) / (1 << 20) }
	var parts []heapPart
	wire := make([][]byte, pods)
	for i := range wire {
		data, err := burstPod(i).Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		wire[i] = data
	}
	sch := kruntime.NewScheme()
	metav1.AddMetaToScheme(sch)
	caches, err := kube.NewCaches(fake.NewClientset(), metadatafake.NewSimpleMetadataClient(sch), kruisefake.NewSimpleClientset(), true)
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-normal"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-virtual-1", Labels: map[string]string{"type": "virtual-kubelet"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-virtual-2", Labels: map[string]string{"type": "virtual-kubelet"}}},
	} {
		obj, _ := kube.TrimNode(n)
		if err := caches.NodeInformer.GetIndexer().Add(obj); err != nil {
			tb.Fatal(err)
		}
	}

	start := liveHeap()
	for _, data := range wire {
		// Decoded one by one, as the informer does.
		pod := &corev1.Pod{}
		if err := pod.Unmarshal(data); err != nil {
			tb.Fatal(err)
		}
		obj, _ := kube.CachePod(pod)
		if err := caches.PodInformer.GetIndexer().Add(obj); err != nil {
			tb.Fatal(err)
		}
	}
	cached := liveHeap()
	parts = append(parts, heapPart{"pod-cache", mib(start, cached)})
	runtime.KeepAlive(wire) // counted in start and in cached alike
	wire = nil

	sink := &slowSink{pods: map[string]int{}}
	ev := newEvents(sink, scheme.Scheme, corev1.EventSource{Component: eventSource}, eventShards)
	var busy atomic.Bool
	busy.Store(true)
	ev.deferWhile(busy.Load)
	recorder := &dropRecorder{}
	recorder.to.Store(ev)
	rec := reconciler.New(reconciler.DefaultConfig(), caches, crrCacheWriter{store: caches.CRRInformer.GetIndexer()}, reconciler.NoLiveReads{},
		recorder, nil, clocktesting.NewFakeClock(burstExit.Add(time.Second)))
	before := liveHeap()
	for i := range pods {
		for ev.recorded.Load()-ev.sink.taken.Load() > 400 {
			// A broadcaster drops what it cannot queue (a thousand).
			time.Sleep(time.Millisecond)
		}
		if _, err := rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: fmt.Sprintf("ctl1-%05x", i)}); err != nil {
			tb.Fatal(err)
		}
	}
	for ev.recorded.Load() > ev.sink.taken.Load() {
		time.Sleep(time.Millisecond)
	}
	if got := ev.sink.taken.Load() - ev.sink.dropped.Load(); got != int64(pods) {
		tb.Fatalf("%d events held back, want one per pod (%d)", got, pods)
	}
	crrs := caches.CRRInformer.GetIndexer()
	if n := len(crrs.List()); n != pods/2 {
		tb.Fatalf("%d CRRs made, want one per normal-node pod (%d)", n, pods/2)
	}
	// Each part is what the heap loses when it goes, last in first out.
	held := liveHeap()
	busy.Store(false)
	sink.drainAndForget(tb, pods)
	written := liveHeap()
	if err := crrs.Replace(nil, ""); err != nil {
		tb.Fatal(err)
	}
	noCRRs := liveHeap()
	recorder.to.Store(nil)
	ev.shutdown(time.Second)
	ev = nil
	noEvents := liveHeap()
	parts = append(parts,
		heapPart{"events-held", mib(written, held)},
		heapPart{"crr-cache", mib(noCRRs, written)},
		heapPart{"correlators", mib(noEvents, noCRRs)},
		heapPart{"pod-memories", mib(before, noEvents)})
	runtime.KeepAlive(caches)
	runtime.KeepAlive(rec)
	return parts
}

// dropRecorder records through to until it is dropped.
type dropRecorder struct{ to atomic.Pointer[events] }

func (r *dropRecorder) Event(object kruntime.Object, eventtype, reason, message string) {
	if e := r.to.Load(); e != nil {
		e.Event(object, eventtype, reason, message)
	}
}

// A burst holds every pod's memory from its stop until its sidecars exit:
// what the reconciler keeps of a pod through that window is kept small:
// 730 bytes a pod here, more than 900 before the rare part and the echo
// note were split off the memory (BenchmarkBurstHeapHeld, at 20,000 pods:
// 810 bytes, 1,033 before).
func TestAPodsMemoryThroughABurstIsKeptSmall(t *testing.T) {
	const pods, most = 4000, 900
	for _, p := range burstHeap(t, pods) {
		if p.name != "pod-memories" {
			continue
		}
		perPod := p.mib * (1 << 20) / pods
		t.Logf("a pod's memory through a burst: %.0f bytes", perPod)
		if perPod > most {
			t.Errorf("a pod's memory through a burst keeps %.0f bytes, more than %d", perPod, most)
		}
		return
	}
	t.Fatal("burstHeap measured no pod memories")
}
