package sim

import (
	"sort"
	"strconv"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Cache is one controller's informer view: it implements reconciler.Reader
// and changes only when a notification is delivered, so it lags the world.
type Cache struct {
	crrAPI bool
	// served answers a rediscovery of the CRR API (refusals.go).
	served func() bool
	pods   map[cache.ObjectName]*corev1.Pod
	crrs   map[cache.ObjectName]*kruisev1alpha1.ContainerRecreateRequest
	byUID  map[types.UID]map[cache.ObjectName]bool // CRRs by their pod-uid label
	nodes  map[string]decision.NodeFacts
	young  map[string]bool // nodes within the daemon grace (nodes.go)
	// noDaemon: normal nodes whose NodeImage no kruise-daemon ever wrote.
	noDaemon map[string]bool
	// nodeImages: OpenKruise's NodeImage API is served (OpenKruise is
	// installed; the CRDRemoved fault removes only the CRR CRD).
	nodeImages bool
	// deleted remembers deleted pods, so a late, reordered update cannot
	// bring one back (a watch keeps each object's events in order).
	deleted map[types.UID]bool
	// crrGone holds each deleted CRR's last resourceVersion, so a late,
	// reordered update cannot bring it back; a CRR made again under the
	// name has a newer one.
	crrGone map[cache.ObjectName]string
	// lastRead is the pod the controller last read, so the trace can show
	// which version a write was decided on.
	lastRead *corev1.Pod
}

var _ reconciler.Reader = (*Cache)(nil)

// listCache is what a starting informer lists: the world as it is now.
func (w *World) listCache(crrAPI bool) *Cache {
	c := &Cache{crrAPI: crrAPI, pods: map[cache.ObjectName]*corev1.Pod{},
		crrs: map[cache.ObjectName]*kruisev1alpha1.ContainerRecreateRequest{}, byUID: map[types.UID]map[cache.ObjectName]bool{},
		nodes: map[string]decision.NodeFacts{}, young: map[string]bool{}, deleted: map[types.UID]bool{}}
	for k, e := range w.pods {
		c.pods[k] = e.obj
	}
	if crrAPI {
		for _, crr := range w.crrs {
			c.storeCRR(crr, false)
		}
	}
	c.noDaemon = map[string]bool{}
	for _, n := range w.nodes {
		c.nodes[n.name] = n.facts
		c.young[n.name] = n.young
		c.noDaemon[n.name] = !n.virtual && n.daemon == nil
	}
	return c
}

func (c *Cache) Pod(namespace, name string) (*corev1.Pod, error) {
	p, ok := c.pods[cache.ObjectName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	c.lastRead = p
	return p, nil
}

// PodConsidered implements reconciler.ConsideredReader, as kube's pod cache
// does, by asking the decision of the pod held.
func (c *Cache) PodConsidered(namespace, name string) (considered, held bool) {
	p, ok := c.pods[cache.ObjectName{Namespace: namespace, Name: name}]
	if !ok || p == nil {
		return false, false
	}
	return decision.Considered(p), true
}

func (c *Cache) Node(name string) (decision.NodeFacts, bool) {
	f, ok := c.nodes[name]
	return f, ok
}

// CRRs lists the pod's CRRs by name, so the order never depends on a map.
func (c *Cache) CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error) {
	keys := c.byUID[pod.UID]
	out := make([]*kruisev1alpha1.ContainerRecreateRequest, 0, len(keys))
	for k := range keys {
		if k.Namespace == pod.Namespace {
			out = append(out, c.crrs[k])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (c *Cache) CRRAPIAvailable() bool { return c.crrAPI }

// storePod applies a delivered pod version; an older version than the one
// held is dropped, as a watch never moves an object backwards.
func (c *Cache) storePod(key cache.ObjectName, pod *corev1.Pod, deleted bool) {
	held, ok := c.pods[key]
	switch {
	case deleted:
		c.deleted[pod.UID] = true
		if ok && held.UID == pod.UID {
			delete(c.pods, key)
		}
	case c.deleted[pod.UID]:
	case !ok || newer(pod.ResourceVersion, held.ResourceVersion):
		c.pods[key] = pod
	}
}

func (c *Cache) storeCRR(crr *kruisev1alpha1.ContainerRecreateRequest, deleted bool) {
	key := cache.ObjectName{Namespace: crr.Namespace, Name: crr.Name}
	uid := crrPodUID(crr)
	if deleted {
		delete(c.crrs, key)
		delete(c.byUID[uid], key)
		if c.crrGone == nil {
			c.crrGone = map[cache.ObjectName]string{}
		}
		c.crrGone[key] = crr.ResourceVersion
		return
	}
	if held, ok := c.crrs[key]; ok && !newer(crr.ResourceVersion, held.ResourceVersion) {
		return
	}
	if gone, ok := c.crrGone[key]; ok {
		if !newer(crr.ResourceVersion, gone) {
			return
		}
		delete(c.crrGone, key)
	}
	c.crrs[key] = crr
	if c.byUID[uid] == nil {
		c.byUID[uid] = map[cache.ObjectName]bool{}
	}
	c.byUID[uid][key] = true
}

func newer(a, b string) bool {
	x, _ := strconv.ParseInt(a, 10, 64)
	y, _ := strconv.ParseInt(b, 10, 64)
	return x > y
}
