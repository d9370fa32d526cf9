package kube

import (
	"context"
	"fmt"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Syncer is what the workers call: reconciler.Reconciler in production.
type Syncer interface {
	Sync(ctx context.Context, key cache.ObjectName) (time.Duration, error)
}

// Controller feeds pod keys from informer events to a Syncer: handlers only
// enqueue, workers only sync (sample-controller's shape).
type Controller struct {
	caches *Caches
	syncer Syncer
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	events *informerEvents
}

// NewController wires event handlers from the caches to a rate-limited queue.
func NewController(caches *Caches, syncer Syncer) (*Controller, error) {
	c := &Controller{
		caches: caches,
		syncer: syncer,
		events: newInformerEvents(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			retryRateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "sidecar-terminator"}),
	}
	if _, err := caches.PodInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			queued := podAddMatters(obj)
			c.events.count(kindPod, eventAdd, queued)
			if queued {
				c.enqueuePod(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			queued := c.podUpdateMatters(old, obj)
			c.events.count(kindPod, eventUpdate, queued)
			if queued {
				c.enqueuePod(obj)
			}
		},
		DeleteFunc: func(obj any) {
			c.events.count(kindPod, eventDelete, true)
			c.enqueuePod(obj)
		},
	}); err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	if err := caches.AddCRRHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.events.count(kindCRR, eventAdd, c.crrAddMatters(obj) && c.enqueueCRRPod(obj)) },
		UpdateFunc: func(old, obj any) {
			c.events.count(kindCRR, eventUpdate, crrUpdateMatters(old, obj) && c.enqueueCRRPod(obj))
		},
		DeleteFunc: func(obj any) { c.events.count(kindCRR, eventDelete, c.enqueueCRRPod(obj)) },
	}); err != nil {
		return nil, fmt.Errorf("watch CRRs: %w", err)
	}
	return c, nil
}

// retryRateLimiter backs failed syncs off per pod only (see
// reconciler.RetryMaxDelay for why not client-go's default).
func retryRateLimiter() workqueue.TypedRateLimiter[cache.ObjectName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](reconciler.RetryBaseDelay, reconciler.RetryMaxDelay)
}

func (c *Controller) enqueuePod(obj any) {
	if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
		c.queue.Add(key)
	}
}

// EchoFilter is a Syncer that also knows which events only echo its own
// writes, or end a pod it then forgets (reconciler.Reconciler, echo.go):
// those need no sync.
type EchoFilter interface {
	// PodViewChangeMatters is asked once the cache has found that the
	// decision considers one of the two versions. The two pods are lent
	// for the call (lentPods): it neither keeps nor changes them.
	PodViewChangeMatters(old, new *corev1.Pod) bool
	CRRAddMatters(crr *kruisev1alpha1.ContainerRecreateRequest) bool
}

// podUpdateMatters, podAddMatters and crrUpdateMatters drop, before the
// queue, the events that change nothing a sync reads (reconciler's filters),
// and with an EchoFilter the echoes of the syncer's own writes.
// Objects of another type are let through.
func (c *Controller) podUpdateMatters(old, obj any) bool {
	f, _ := c.syncer.(EchoFilter)
	return podUpdateMatters(old, obj, f)
}

// podUpdateMatters and podAddMatters read the pods as the cache holds
// them (CachePod); anything else is queued. Both answer first from what
// the cache knows of each version without decoding it (decision.Considered),
// as reconciler.PodUpdateMatters and PodAddMatters would
// (TestTheCachesFiltersAnswerAsTheReconcilers). An update is then put to
// the echo filter, if there is one, or to the reconciler's view comparison:
// the first rule, already answered, is not run again on the decoded pods.
func podUpdateMatters(old, obj any, echoes EchoFilter) bool {
	if neitherConsidered(old, obj) {
		return false
	}
	lent := lentPods.Get().(*[2]corev1.Pod)
	defer lentPods.Put(lent)
	o, n := &lent[0], &lent[1]
	ok1, ok2 := decodeCached(old, o), decodeCached(obj, n)
	switch {
	case !ok1 || !ok2:
		return true
	case echoes != nil:
		return echoes.PodViewChangeMatters(o, n)
	default:
		return reconciler.PodViewChanged(o, n)
	}
}

// neitherConsidered is reconciler.PodUpdateMatters's first rule: two
// versions of one pod, neither of which the decision considers.
func neitherConsidered(old, obj any) bool {
	o, ok1 := cachedOf(old)
	n, ok2 := cachedOf(obj)
	return ok1 && ok2 && o.uid == n.uid && !o.considered && !n.considered
}

func (c *Controller) crrAddMatters(obj any) bool {
	f, filters := c.syncer.(EchoFilter)
	if !filters {
		return true
	}
	crr, ok := CachedCRR(obj)
	return !ok || f.CRRAddMatters(crr)
}

func podAddMatters(obj any) bool {
	c, ok := cachedOf(obj)
	return !ok || c.considered
}

func crrUpdateMatters(old, obj any) bool {
	o, ok1 := CachedCRR(old)
	n, ok2 := CachedCRR(obj)
	return !ok1 || !ok2 || reconciler.CRRUpdateMatters(o, n)
}

// enqueueCRRPod wakes the pod a CRR belongs to, so a CRR's progress (or its
// deletion by someone else) is followed through; false when nothing was
// queued (the filter dropped it).
func (c *Controller) enqueueCRRPod(obj any) bool {
	crr, ok := cachedCRROf(obj)
	if !ok {
		return false
	}
	key := cache.ObjectName{Namespace: crr.namespace, Name: crr.podName}
	// reconciler.CRREventMatters, from what the cache knows of the pod
	// without decoding it: held, and considered.
	if considered, _ := c.caches.PodConsidered(key.Namespace, key.Name); !considered {
		return false
	}
	c.queue.Add(key)
	return true
}

// RegisterMetrics registers the informer event counts.
func (c *Controller) RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(c.events.vec)
}

// Queued is how many pods wait for a sync.
func (c *Controller) Queued() int { return c.queue.Len() }

// Run waits for the caches, then runs workers until ctx ends. The caches must
// have been started.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Waiting for informer caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), c.caches.Synced()...) {
		return fmt.Errorf("caches did not sync")
	}
	logger.Info("Starting workers", "count", workers)
	for range workers {
		go wait.UntilWithContext(ctx, c.runWorker, time.Second)
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	// Let the syncs in flight finish, so that a write they made is followed
	// by its event before the process goes.
	c.queue.ShutDownWithDrain()
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	after, err := c.syncer.Sync(ctx, key)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed; will retry", "pod", key.String())
	}
	reconciler.Requeue(c.queue, key, after, err)
	return true
}

var (
	_ Syncer     = (*reconciler.Reconciler)(nil)
	_ EchoFilter = (*reconciler.Reconciler)(nil)
)
