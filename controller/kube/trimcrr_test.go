package kube

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// kruiseCRR is one of our CRRs as the API server sends it once kruise's
// webhook and kruise-daemon have worked on it.
func kruiseCRR(stage string, states bool) *kruisev1alpha1.ContainerRecreateRequest {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	crr := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "batch-1-x7k2p-sidecar-terminator-1", Namespace: "team", UID: "0d6c2b1e-crr", ResourceVersion: "77",
			CreationTimestamp: at, Generation: 2, Finalizers: []string{"kruise"},
			Annotations: map[string]string{"apps.kruise.io/last-applied": "{}"},
			Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: "3f0c-pod", reconciler.LabelAttempt: "2",
				kruisev1alpha1.ContainerRecreateRequestPodUIDKey: "3f0c-pod", kruisev1alpha1.ContainerRecreateRequestNodeNameKey: "node-17",
				kruisev1alpha1.ContainerRecreateRequestActiveKey: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "batch-1-x7k2p", UID: "3f0c-pod"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kruise-daemon"}}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "batch-1-x7k2p",
			Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "sidecar",
				StatusContext: &kruisev1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://0123456789abcdef", RestartCount: 1}}},
			Strategy:              &kruisev1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: kruisev1alpha1.ContainerRecreateRequestFailurePolicyIgnore, ForceRecreate: true},
			ActiveDeadlineSeconds: ptr.To[int64](60), TTLSecondsAfterFinished: ptr.To[int32](1800)},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted, CompletionTime: &at, Message: "done"},
	}
	if stage != "" {
		crr.Labels[reconciler.LabelStage] = stage
	}
	if states {
		crr.Status.ContainerRecreateStates = []kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "sidecar", Phase: kruisev1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true, Message: "killed by kruise-daemon"}}
	}
	return crr
}

// A cached CRR reads as the CRR the API server sent: the same facts for the
// decision, the same answer from the update filter, the same index key,
// resourceVersion and creation time.
func TestTrimmedCRRReadsAsTheFull(t *testing.T) {
	for name, full := range map[string]*kruisev1alpha1.ContainerRecreateRequest{
		"completed":     kruiseCRR("", true),
		"stage":         kruiseCRR("2", true),
		"no states yet": kruiseCRR("", false),
		"edited attempt": func() *kruisev1alpha1.ContainerRecreateRequest {
			c := kruiseCRR("", true)
			c.Labels[reconciler.LabelAttempt] = "x"
			return c
		}(),
		"no status context": func() *kruisev1alpha1.ContainerRecreateRequest {
			c := kruiseCRR("", true)
			c.Spec.Containers[0].StatusContext = nil
			return c
		}(),
		"managed-by removed": func() *kruisev1alpha1.ContainerRecreateRequest {
			c := kruiseCRR("", true)
			delete(c.Labels, reconciler.LabelManagedBy)
			return c
		}(),
	} {
		obj, err := TrimCRR(full.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		trimmed, _ := CachedCRR(obj)
		if reconciler.CRRUpdateMatters(full, trimmed) {
			t.Errorf("%s: the trimmed CRR reads differently from the full one:\n%+v\n%+v", name, trimmed, full)
		}
		if trimmed.ResourceVersion != full.ResourceVersion || !trimmed.CreationTimestamp.Equal(&full.CreationTimestamp) ||
			trimmed.Labels[reconciler.LabelPodUID] != full.Labels[reconciler.LabelPodUID] {
			t.Errorf("%s: resourceVersion, creation time or pod UID lost: %+v", name, trimmed.ObjectMeta)
		}
	}
}

// What nothing reads from the cache is not kept: kruise's labels, the
// owner reference, the strategy and TTL, container IDs, each state's
// message, annotations, finalizers and managed fields.
func TestTrimmedCRRDropsWhatNothingReads(t *testing.T) {
	obj, err := TrimCRR(kruiseCRR("", true))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := CachedCRR(obj)
	if len(c.Labels) != 3 || c.OwnerReferences != nil || c.Annotations != nil || c.Finalizers != nil || c.ManagedFields != nil {
		t.Errorf("metadata kept: labels %v, owners %v, annotations %v, finalizers %v, managed fields %v",
			c.Labels, c.OwnerReferences, c.Annotations, c.Finalizers, c.ManagedFields)
	}
	if c.Spec.Strategy != nil || c.Spec.TTLSecondsAfterFinished != nil || c.Spec.Containers[0].StatusContext.ContainerID != "" {
		t.Errorf("spec kept: %+v", c.Spec)
	}
	if c.Status.ContainerRecreateStates[0].Message != "" {
		t.Errorf("state message kept: %+v", c.Status.ContainerRecreateStates[0])
	}
}

// BenchmarkTrimCRRRetained reports the heap a cached CRR keeps alive
// (retained-B/crr), decoded from JSON as the kruise client decodes it, with
// the managed fields stripped alone and trimmed.
func BenchmarkTrimCRRRetained(b *testing.B) {
	const crrs = 10000
	wire := make([][]byte, crrs)
	for i := range wire {
		c := kruiseCRR("", true)
		c.Name = fmt.Sprintf("batch-%d-x7k2p-sidecar-terminator-1", i)
		c.Labels[reconciler.LabelPodUID] = fmt.Sprintf("3f0c1d9e-4b2a-4c1e-9d7f-%012d", i)
		c.Labels[kruisev1alpha1.ContainerRecreateRequestPodUIDKey] = c.Labels[reconciler.LabelPodUID]
		data, err := json.Marshal(c)
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = data
	}
	for name, transform := range map[string]func(any) (any, error){"stripped": StripManagedFields, "trimmed": TrimCRR} {
		b.Run(name, func(b *testing.B) {
			bytes, _ := retainedPerObject(b, b.N, wire, func(data []byte) (any, error) {
				c := &kruisev1alpha1.ContainerRecreateRequest{}
				err := json.Unmarshal(data, c)
				return c, err
			}, transform)
			b.ReportMetric(bytes, "retained-B/crr")
		})
	}
}

// The CRR cache keys a cached CRR by its name, indexes it by its pod UID
// label, and reads it back (also from a tombstone) as a CRR of its own:
// what a reader changes is not in the cache.
func TestTheCRRCacheKeysIndexesAndReadsACachedCRR(t *testing.T) {
	full := kruiseCRR("2", true)
	full.DeletionTimestamp = &full.CreationTimestamp
	obj, err := TrimCRR(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{crrByPodUID: indexByPodUID})
	if err := store.Add(obj); err != nil {
		t.Fatal(err)
	}
	// A newer version of the same CRR replaces the cached one.
	older := full.DeepCopy()
	older.ResourceVersion = "76"
	if err := store.Update(cacheCRR(older)); err != nil {
		t.Fatal(err)
	}
	if err := store.Update(obj); err != nil {
		t.Fatal(err)
	}
	got, err := store.ByIndex(crrByPodUID, full.Labels[reconciler.LabelPodUID])
	if err != nil || len(got) != 1 {
		t.Fatalf("index by pod UID: %d CRRs, %v", len(got), err)
	}
	key, _ := cache.MetaNamespaceKeyFunc(got[0])
	if key != full.Namespace+"/"+full.Name {
		t.Errorf("key %q", key)
	}
	for name, o := range map[string]any{"cached": got[0], "tombstone": cache.DeletedFinalStateUnknown{Key: key, Obj: got[0]}} {
		c, ok := CachedCRR(o)
		if !ok {
			t.Fatalf("%s: does not read as a CRR", name)
		}
		if c.Name != full.Name || c.Namespace != full.Namespace || c.UID != full.UID || c.Spec.PodName != full.Spec.PodName ||
			c.DeletionTimestamp == nil || !c.DeletionTimestamp.Equal(full.DeletionTimestamp) ||
			*c.Spec.ActiveDeadlineSeconds != *full.Spec.ActiveDeadlineSeconds || c.Labels[reconciler.LabelStage] != "2" ||
			c.Status.Message != full.Status.Message || c.Status.Phase != full.Status.Phase || len(c.Status.ContainerRecreateStates) != 1 {
			t.Errorf("%s: read %+v", name, c)
		}
		// A reader's change stays its own.
		c.Labels[reconciler.LabelAttempt] = "9"
		*c.Spec.ActiveDeadlineSeconds = 1
		c.Status.ContainerRecreateStates[0].Phase = "Changed"
	}
	again, _ := CachedCRR(got[0])
	if again.Labels[reconciler.LabelAttempt] != "2" || *again.Spec.ActiveDeadlineSeconds != 60 || again.Status.ContainerRecreateStates[0].Phase == "Changed" {
		t.Errorf("a reader's change reached the cache: %+v", again)
	}
	if c, ok := CachedCRR(got[0].(runtime.Object).DeepCopyObject()); !ok || c.Name != full.Name || c.Labels[reconciler.LabelPodUID] != full.Labels[reconciler.LabelPodUID] {
		t.Errorf("deep copy reads %+v", c)
	}
	if _, ok := CachedCRR(&corev1.Pod{}); ok {
		t.Error("a pod read as a CRR")
	}
}

// The CRR cache keeps one of a burst's CRRs in about half of what its
// trimmed struct cost: 700 bytes bound it, where the trimmed
// *kruisev1alpha1.ContainerRecreateRequest kept 1,104 (BenchmarkTrimCRRRetained).
func TestACachedCRRIsKeptSmall(t *testing.T) {
	wire := make([][]byte, 2000)
	for i := range wire {
		c := kruiseCRR("", true)
		c.Name = fmt.Sprintf("batch-%d-x7k2p-sidecar-terminator-1", i)
		c.Labels[reconciler.LabelPodUID] = fmt.Sprintf("3f0c1d9e-4b2a-4c1e-9d7f-%012d", i)
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		wire[i] = data
	}
	bytes, _ := retainedPerObject(t, 1, wire, func(data []byte) (any, error) {
		c := &kruisev1alpha1.ContainerRecreateRequest{}
		err := json.Unmarshal(data, c)
		return c, err
	}, TrimCRR)
	if bytes > 700 {
		t.Errorf("a cached CRR keeps %.0f bytes, want at most 700", bytes)
	}
}
