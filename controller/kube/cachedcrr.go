package kube

import (
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// crrLabels are the labels of ours a cached CRR keeps (cachedCRR.labels is
// indexed as they are).
var crrLabels = [...]string{reconciler.LabelManagedBy, reconciler.LabelPodUID, reconciler.LabelAttempt, reconciler.LabelStage}

const crrPodUIDLabel = 1 // crrLabels[crrPodUIDLabel] is reconciler.LabelPodUID

// cachedCRR is how the CRR cache holds one of our CRRs: TrimCRR's fields
// (see there) in a struct of this package's own, read back as a
// *kruisev1alpha1.ContainerRecreateRequest by CachedCRR. The API's struct
// is sized for every field a CRR may have, and its labels are a map: a
// trimmed CRR kept 1,104 bytes alive, this 576 (BenchmarkTrimCRRRetained),
// and a burst's CRRs are cached together (10,000 in the scale tier's).
type cachedCRR struct {
	objectKeys
	created   metav1.Time
	deleted   *metav1.Time
	completed *metav1.Time
	deadline  *int64
	podName   string
	phase     kruisev1alpha1.ContainerRecreateRequestPhase
	message   string
	// labels holds crrLabels' values; set has bit i for each label present.
	labels     [len(crrLabels)]string
	set        uint8
	containers []cachedCRRContainer
	states     []kruisev1alpha1.ContainerRecreateRequestContainerRecreateState
}

// cachedCRRContainer is a container of the CRR's spec: its name and,
// when kruise's webhook set its status context, the restart count.
type cachedCRRContainer struct {
	name         string
	restartCount int32
	context      bool
}

var (
	_ metav1.Object  = (*cachedCRR)(nil)
	_ runtime.Object = (*cachedCRR)(nil)
)

func (c *cachedCRR) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (c *cachedCRR) DeepCopyObject() runtime.Object {
	out := *c
	out.deleted, out.completed = c.deleted.DeepCopy(), c.completed.DeepCopy()
	if c.deadline != nil {
		d := *c.deadline
		out.deadline = &d
	}
	out.containers = append([]cachedCRRContainer(nil), c.containers...)
	out.states = append([]kruisev1alpha1.ContainerRecreateRequestContainerRecreateState(nil), c.states...)
	return &out
}

// cacheCRR is TrimCRR's work: what the reconciler reads of c, in a
// cachedCRR, with the values every CRR repeats shared (intern).
func cacheCRR(c *kruisev1alpha1.ContainerRecreateRequest) *cachedCRR {
	out := &cachedCRR{
		objectKeys: objectKeys{name: c.Name, namespace: intern(c.Namespace), resourceVersion: c.ResourceVersion, uid: c.UID},
		created:    c.CreationTimestamp, deleted: c.DeletionTimestamp, completed: c.Status.CompletionTime,
		deadline: c.Spec.ActiveDeadlineSeconds, podName: c.Spec.PodName,
		phase:   kruisev1alpha1.ContainerRecreateRequestPhase(intern(string(c.Status.Phase))),
		message: c.Status.Message,
	}
	for i, k := range crrLabels {
		v, ok := c.Labels[k]
		if !ok {
			continue
		}
		if i != crrPodUIDLabel {
			v = intern(v) // the same few values on every CRR
		}
		out.labels[i] = v
		out.set |= 1 << i
	}
	if n := len(c.Spec.Containers); n > 0 {
		out.containers = make([]cachedCRRContainer, n)
		for i, ctr := range c.Spec.Containers {
			out.containers[i].name = intern(ctr.Name)
			if sc := ctr.StatusContext; sc != nil {
				out.containers[i].restartCount, out.containers[i].context = sc.RestartCount, true
			}
		}
	}
	if n := len(c.Status.ContainerRecreateStates); n > 0 {
		out.states = make([]kruisev1alpha1.ContainerRecreateRequestContainerRecreateState, n)
		for i, st := range c.Status.ContainerRecreateStates {
			out.states[i] = kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{
				Name: intern(st.Name), Phase: kruisev1alpha1.ContainerRecreateRequestPhase(intern(string(st.Phase))), IsKilled: st.IsKilled}
		}
	}
	return out
}

// crr is the cached CRR as the reconciler reads it: a new object, which
// no reader can change the cache through.
func (c *cachedCRR) crr() *kruisev1alpha1.ContainerRecreateRequest {
	out := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{
		Name: c.name, Namespace: c.namespace, UID: c.uid, ResourceVersion: c.resourceVersion,
		CreationTimestamp: c.created, DeletionTimestamp: c.deleted.DeepCopy(),
	}}
	if c.set != 0 {
		out.Labels = make(map[string]string, len(crrLabels))
		for i, k := range crrLabels {
			if c.set&(1<<i) != 0 {
				out.Labels[k] = c.labels[i]
			}
		}
	}
	out.Spec = kruisev1alpha1.ContainerRecreateRequestSpec{PodName: c.podName}
	if c.deadline != nil {
		d := *c.deadline
		out.Spec.ActiveDeadlineSeconds = &d
	}
	if len(c.containers) > 0 {
		out.Spec.Containers = make([]kruisev1alpha1.ContainerRecreateRequestContainer, len(c.containers))
		for i, ctr := range c.containers {
			out.Spec.Containers[i].Name = ctr.name
			if ctr.context {
				out.Spec.Containers[i].StatusContext = &kruisev1alpha1.ContainerRecreateRequestContainerContext{RestartCount: ctr.restartCount}
			}
		}
	}
	out.Status = kruisev1alpha1.ContainerRecreateRequestStatus{Phase: c.phase, CompletionTime: c.completed.DeepCopy(), Message: c.message}
	if len(c.states) > 0 {
		out.Status.ContainerRecreateStates = append([]kruisev1alpha1.ContainerRecreateRequestContainerRecreateState(nil), c.states...)
	}
	return out
}

// CachedCRR reads what the CRR cache holds (TrimCRR's answer), also
// inside a tombstone; false for anything else.
func CachedCRR(obj any) (*kruisev1alpha1.ContainerRecreateRequest, bool) {
	c, ok := cachedCRROf(obj)
	if !ok {
		return nil, false
	}
	return c.crr(), true
}

// cachedCRROf is what the CRR cache holds, also inside a tombstone.
func cachedCRROf(obj any) (*cachedCRR, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	c, ok := obj.(*cachedCRR)
	return c, ok
}
