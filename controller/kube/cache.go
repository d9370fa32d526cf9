package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	kruiseappsinformers "github.com/openkruise/kruise-api/client/informers/externalversions/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
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
	// CRRInformer is nil while the CRR API has never been served; read it
	// through crrInformer once the caches run, as discovery may add it.
	CRRInformer cache.SharedIndexInformer
	// NodeImageInformer is nil unless WatchNodeImages was called
	// (daemons.go): OpenKruise's per-node objects, which say which nodes a
	// kruise-daemon serves.
	NodeImageInformer cache.SharedIndexInformer

	podFactory     informers.SharedInformerFactory
	nodeFactory    metadatainformer.SharedInformerFactory
	nodeObjFactory informers.SharedInformerFactory
	kruiseFactory  kruiseinformers.SharedInformerFactory
	kruise         kruiseclient.Interface

	mu          sync.Mutex
	crrServed   bool
	crrHandlers []cache.ResourceEventHandler
	stop        <-chan struct{}
	rediscover  chan struct{}
}

// NewCaches sets up the informers; crrAPI says whether the CRR API is served.
func NewCaches(client kubernetes.Interface, meta metadata.Interface, kruise kruiseclient.Interface, crrAPI bool) (*Caches, error) {
	c := &Caches{kruise: kruise, rediscover: make(chan struct{}, 1)}
	// The informers are made with no index but those read here: a factory's
	// own adds a namespace index, a set of keys per namespace that nothing
	// here reads (0.7 MiB of BenchmarkBurstHeapHeld's 20,000-pod burst, with
	// the CRR informer's).
	c.podFactory = informers.NewSharedInformerFactory(client, 0)
	c.PodInformer = c.podFactory.InformerFor(&corev1.Pod{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(client, metav1.NamespaceAll, resync, cache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector = PodFieldSelector })
	})
	if err := c.PodInformer.SetTransform(CachePod); err != nil {
		return nil, fmt.Errorf("set pod transform: %w", err)
	}
	c.nodeFactory = metadatainformer.NewSharedInformerFactory(meta, 0)
	// Nodes as typed objects, trimmed to the facts their platform is known
	// from (TrimNode): a node's kubeletVersion and providerID are not in
	// its metadata.
	c.nodeObjFactory = informers.NewSharedInformerFactory(client, 0)
	c.NodeInformer = c.nodeObjFactory.InformerFor(&corev1.Node{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewNodeInformer(client, resync, cache.Indexers{})
	})
	if err := c.NodeInformer.SetTransform(TrimNode); err != nil {
		return nil, fmt.Errorf("set node transform: %w", err)
	}
	if crrAPI {
		if err := c.watchCRRs(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// watchCRRs makes the CRR informer, listing only our CRRs. Called with mu
// held, or before the caches are shared.
func (c *Caches) watchCRRs() error {
	c.crrServed = true
	if c.CRRInformer != nil {
		return nil
	}
	c.kruiseFactory = kruiseinformers.NewSharedInformerFactory(c.kruise, 0)
	informer := c.kruiseFactory.InformerFor(&kruisev1alpha1.ContainerRecreateRequest{}, func(client kruiseclient.Interface, resync time.Duration) cache.SharedIndexInformer {
		return kruiseappsinformers.NewFilteredContainerRecreateRequestInformer(client, metav1.NamespaceAll, resync, cache.Indexers{},
			func(o *metav1.ListOptions) {
				o.LabelSelector = labels.SelectorFromSet(labels.Set{reconciler.LabelManagedBy: reconciler.ManagedByValue}).String()
			})
	})
	if err := informer.SetTransform(TrimCRR); err != nil {
		return fmt.Errorf("set CRR transform: %w", err)
	}
	if err := informer.AddIndexers(cache.Indexers{crrByPodUID: indexByPodUID}); err != nil {
		return fmt.Errorf("index CRRs: %w", err)
	}
	for _, h := range c.crrHandlers {
		if _, err := informer.AddEventHandler(h); err != nil {
			return fmt.Errorf("watch CRRs: %w", err)
		}
	}
	c.CRRInformer = informer
	if c.stop != nil {
		c.kruiseFactory.Start(c.stop)
	}
	return nil
}

// AddCRRHandler adds a handler to the CRR informer, now or whenever
// discovery finds the API.
func (c *Caches) AddCRRHandler(h cache.ResourceEventHandler) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crrHandlers = append(c.crrHandlers, h)
	if c.CRRInformer == nil {
		return nil
	}
	_, err := c.CRRInformer.AddEventHandler(h)
	return err
}

func (c *Caches) crrInformer() cache.SharedIndexInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.crrServed {
		return nil
	}
	return c.CRRInformer
}

// RediscoverCRRAPI implements reconciler.Reader's: the next discovery
// round runs now.
func (c *Caches) RediscoverCRRAPI() {
	select {
	case c.rediscover <- struct{}{}:
	default:
	}
}

// DiscoverCRRAPI asks discovery every period, and at once when a CRR create
// answered 404, whether the CRR API is served, until ctx ends. Losing it
// (the CRD removed) turns CRRs off: pods get image swaps where an image is
// known and a Warning otherwise; finding it (OpenKruise installed) starts
// the CRR informer. Each change is logged.
func (c *Caches) DiscoverCRRAPI(ctx context.Context, d discovery.DiscoveryInterface, period time.Duration) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-c.rediscover:
		}
		served, err := CRRAPIServed(d)
		if err != nil {
			logger.Info("Discovery of the ContainerRecreateRequest API failed; keeping what was known", "err", err.Error())
			continue
		}
		c.mu.Lock()
		was := c.crrServed
		var werr error
		switch {
		case served && !was:
			werr = c.watchCRRs()
		case !served:
			c.crrServed = false
		}
		c.mu.Unlock()
		switch {
		case werr != nil:
			logger.Error(werr, "ContainerRecreateRequest API found, but its informer could not be set up")
		case served && !was:
			logger.Info("ContainerRecreateRequest API found: sidecars on normal nodes are stopped through kruise-daemon again")
		case !served && was:
			logger.Info("ContainerRecreateRequest API lost (OpenKruise's CRD removed?): only image swaps are possible until it is back")
		}
	}
}

// Start starts the informers; stop ends them.
func (c *Caches) Start(stop <-chan struct{}) {
	c.podFactory.Start(stop)
	c.nodeFactory.Start(stop)
	c.nodeObjFactory.Start(stop)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stop = stop
	if c.kruiseFactory != nil {
		c.kruiseFactory.Start(stop)
	}
}

// Synced lists the informers' HasSynced functions.
func (c *Caches) Synced() []cache.InformerSynced {
	s := []cache.InformerSynced{c.PodInformer.HasSynced, c.NodeInformer.HasSynced}
	if c.NodeImageInformer != nil {
		s = append(s, c.NodeImageInformer.HasSynced)
	}
	if i := c.crrInformer(); i != nil {
		s = append(s, i.HasSynced)
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
	pod, ok := CachedPod(obj)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s: the cache holds a %T", namespace, name, obj)
	}
	return pod, nil
}

// PodConsidered implements reconciler.ConsideredReader from what the cache
// found of the pod when it stored it, without decoding it.
func (c *Caches) PodConsidered(namespace, name string) (considered, held bool) {
	obj, ok, err := c.PodInformer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return false, false
	}
	p, ok := cachedOf(obj)
	if !ok {
		return false, false
	}
	return p.considered, true
}

// Node implements reconciler.Reader.
func (c *Caches) Node(name string) (decision.NodeFacts, bool) {
	obj, ok, err := c.NodeInformer.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return decision.NodeFacts{}, false
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return decision.NodeFacts{}, false
	}
	return NodeFacts(n), true
}

// indexByPodUID is the CRR cache's index: a CRR by its pod UID label.
func indexByPodUID(obj any) ([]string, error) {
	c, ok := obj.(*cachedCRR)
	if !ok {
		return nil, nil
	}
	return []string{c.labels[crrPodUIDLabel]}, nil
}

// CRRs implements reconciler.Reader.
func (c *Caches) CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	informer := c.crrInformer()
	if informer == nil {
		return nil, nil
	}
	objs, err := informer.GetIndexer().ByIndex(crrByPodUID, string(pod.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*kruisev1alpha1.ContainerRecreateRequest, 0, len(objs))
	for _, o := range objs {
		if crr, ok := CachedCRR(o); ok && crr.Namespace == pod.Namespace {
			out = append(out, crr)
		}
	}
	return out, nil
}

// CRRAPIAvailable implements reconciler.Reader.
// Until a CRR informer found late has synced, a pod's earlier CRRs may not
// show yet: the next CRR has a deterministic name, so it meets AlreadyExists.
func (c *Caches) CRRAPIAvailable() bool { return c.crrInformer() != nil }

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
