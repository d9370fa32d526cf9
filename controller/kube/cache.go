package kube

import (
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// PodFieldSelector keeps restartPolicy Always pods (Deployments, StatefulSets,
// DaemonSets: most of a cluster) out of the cache entirely.
var PodFieldSelector = fields.OneTermNotEqualSelector("spec.restartPolicy", string(corev1.RestartPolicyAlways)).String()

const crrByPodUID = "byPodUID"

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Caches are the informers behind the reconciler's Reader.
type Caches struct {
	PodInformer  cache.SharedIndexInformer
	NodeInformer cache.SharedIndexInformer
	CRRInformer  cache.SharedIndexInformer // nil when the CRR API is not served

	podFactory    informers.SharedInformerFactory
	nodeFactory   metadatainformer.SharedInformerFactory
	kruiseFactory kruiseinformers.SharedInformerFactory
}

// NewCaches sets up the informers; crrAPI says whether to watch CRRs.
func NewCaches(client kubernetes.Interface, meta metadata.Interface, kruise kruiseclient.Interface, crrAPI bool) (*Caches, error) {
	c := &Caches{}
	c.podFactory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = PodFieldSelector }))
	c.PodInformer = c.podFactory.Core().V1().Pods().Informer()
	if err := c.PodInformer.SetTransform(TrimPod); err != nil {
		return nil, fmt.Errorf("set pod transform: %w", err)
	}
	c.nodeFactory = metadatainformer.NewSharedInformerFactory(meta, 0)
	c.NodeInformer = c.nodeFactory.ForResource(nodesResource).Informer()
	if err := c.NodeInformer.SetTransform(StripManagedFields); err != nil {
		return nil, fmt.Errorf("set node transform: %w", err)
	}
	if crrAPI {
		c.kruiseFactory = kruiseinformers.NewSharedInformerFactoryWithOptions(kruise, 0,
			kruiseinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = labels.SelectorFromSet(labels.Set{reconciler.LabelManagedBy: reconciler.ManagedByValue}).String()
			}))
		c.CRRInformer = c.kruiseFactory.Apps().V1alpha1().ContainerRecreateRequests().Informer()
		if err := c.CRRInformer.SetTransform(StripManagedFields); err != nil {
			return nil, fmt.Errorf("set CRR transform: %w", err)
		}
		if err := c.CRRInformer.AddIndexers(cache.Indexers{crrByPodUID: func(obj any) ([]string, error) {
			crr, ok := obj.(*kruisev1alpha1.ContainerRecreateRequest)
			if !ok {
				return nil, nil
			}
			return []string{crr.Labels[reconciler.LabelPodUID]}, nil
		}}); err != nil {
			return nil, fmt.Errorf("index CRRs: %w", err)
		}
	}
	return c, nil
}

// Start starts the informers; stop ends them.
func (c *Caches) Start(stop <-chan struct{}) {
	c.podFactory.Start(stop)
	c.nodeFactory.Start(stop)
	if c.kruiseFactory != nil {
		c.kruiseFactory.Start(stop)
	}
}

// Synced lists the informers' HasSynced functions.
func (c *Caches) Synced() []cache.InformerSynced {
	s := []cache.InformerSynced{c.PodInformer.HasSynced, c.NodeInformer.HasSynced}
	if c.CRRInformer != nil {
		s = append(s, c.CRRInformer.HasSynced)
	}
	return s
}

// HasSynced reports whether every informer has synced.
func (c *Caches) HasSynced() bool {
	for _, synced := range c.Synced() {
		if !synced() {
			return false
		}
	}
	return true
}

// Pod implements reconciler.Reader.
func (c *Caches) Pod(namespace, name string) (*corev1.Pod, error) {
	obj, ok, err := c.PodInformer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return obj.(*corev1.Pod), nil
}

// NodeLabels implements reconciler.Reader.
func (c *Caches) NodeLabels(name string) (map[string]string, bool) {
	obj, ok, err := c.NodeInformer.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, false
	}
	return m.Labels, true
}

// CRRs implements reconciler.Reader.
func (c *Caches) CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	if c.CRRInformer == nil {
		return nil, nil
	}
	objs, err := c.CRRInformer.GetIndexer().ByIndex(crrByPodUID, string(pod.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*kruisev1alpha1.ContainerRecreateRequest, 0, len(objs))
	for _, o := range objs {
		if crr, ok := o.(*kruisev1alpha1.ContainerRecreateRequest); ok && crr.Namespace == pod.Namespace {
			out = append(out, crr)
		}
	}
	return out, nil
}

// CRRAPIAvailable implements reconciler.Reader.
func (c *Caches) CRRAPIAvailable() bool { return c.CRRInformer != nil }

// CRRAPIServed asks discovery whether apps.kruise.io/v1alpha1 serves
// containerrecreaterequests.
func CRRAPIServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(kruisev1alpha1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", kruisev1alpha1.GroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "containerrecreaterequests" {
			return true, nil
		}
	}
	return false, nil
}

var _ reconciler.Reader = (*Caches)(nil)
