package kube

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Which nodes a kruise-daemon serves, from OpenKruise's own objects
// (github.com/openkruise/kruise v1.9.1):
//   - pkg/controller/nodeimage/nodeimage_controller.go: kruise-manager
//     creates one NodeImage (apps.kruise.io/v1beta1, named after the node)
//     for every ready node, with no status, whatever runs on the node;
//   - pkg/daemon/daemon.go starts the image puller with the CRR controller,
//     unconditionally, and pkg/daemon/imagepuller/imagepuller_controller.go
//     syncs its node's NodeImage on start and writes its status
//     (utils.go, statusUpdater.updateStatus: the first write always happens,
//     then at least every 12 h);
//   - cmd/daemon/main.go sets the client's user agent to "kruise-daemon",
//     which the API server records as the field manager of that status
//     write (managedFields, subresource "status").
//
// So a NodeImage whose status kruise-daemon has written says a daemon has
// served the node; one that has existed for a grace (--kruise-daemon-grace,
// reconciler.DefaultKruiseDaemonGrace says why 5 minutes) with no such
// write says none runs there (a pool the DaemonSet excludes, a Fargate node, a
// runtime the daemon cannot use). kruise's own image-pull controller draws
// the same conclusion from a NodeImage it gets no answer for ("node has not
// responded for a long time"). The daemon's pods are no signal: on this
// project's local cluster kruise-daemon runs as a host process, not a pod
// (e2e/cluster/kruise.go), and a pod-based rule would call every such node
// daemon-less. A node with no NodeImage, or a cluster without the API, is
// not known to lack a daemon: the CRR path stays, as before. A node a daemon
// has served is one where a stop under a CRR may outlive that CRR's CRD
// (decision's stopsAfterCRD), so it counts for more than "not absent".

// nodeImagesResource is OpenKruise's per-node NodeImage.
var nodeImagesResource = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "nodeimages"}

// daemonManager is the field manager of kruise-daemon's writes.
const daemonManager = "kruise-daemon"

// KruiseDaemonFromNodeImage applies the rule above to a NodeImage's
// metadata (nil: none for the node), the daemon having had grace to write.
func KruiseDaemonFromNodeImage(ni *metav1.ObjectMeta, now time.Time, grace time.Duration) (decision.DaemonState, string) {
	if ni == nil {
		return decision.DaemonUnknown, "no NodeImage for the node, so not known; a CRR is tried"
	}
	for _, f := range ni.ManagedFields {
		if f.Manager == daemonManager && f.Subresource == "status" {
			at := "at an unknown time"
			if f.Time != nil {
				at = "at " + f.Time.UTC().Format(time.RFC3339)
			}
			return decision.DaemonServes, fmt.Sprintf("kruise-daemon wrote the node's NodeImage status %s", at)
		}
	}
	age := now.Sub(ni.CreationTimestamp.Time)
	if age < grace {
		return decision.DaemonUnknown, fmt.Sprintf("the node's NodeImage is %s old and kruise-daemon has not written it yet (it has %s); a CRR is tried", age.Round(time.Second), grace)
	}
	return decision.DaemonAbsent, fmt.Sprintf("kruise-daemon never wrote the node's NodeImage, created %s ago (more than %s); it writes it when it starts", roundAge(age), grace)
}

// roundAge rounds an age for a message: to the minute once it is minutes
// long, to the second below (a grace of seconds is an operator's choice).
func roundAge(age time.Duration) time.Duration {
	if age >= time.Minute {
		return age.Round(time.Minute)
	}
	return age.Round(time.Second)
}

// keepDaemonWrite trims a NodeImage's metadata to what the rule reads: its
// name, creation time and kruise-daemon's status write (without its fields).
func keepDaemonWrite(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp}}
	for _, f := range m.ManagedFields {
		if f.Manager == daemonManager && f.Subresource == "status" {
			f.FieldsV1 = nil
			out.ManagedFields = append(out.ManagedFields, f)
		}
	}
	return out, nil
}

// WatchNodeImages adds the NodeImage metadata informer (started with the
// others); call it before Start, only where the API is served.
func (c *Caches) WatchNodeImages() error {
	informer := c.nodeFactory.ForResource(nodeImagesResource).Informer()
	if err := informer.SetTransform(keepDaemonWrite); err != nil {
		return fmt.Errorf("set NodeImage transform: %w", err)
	}
	c.NodeImageInformer = informer
	return nil
}

// KruiseDaemon implements reconciler.Reader's from the NodeImage cache.
func (c *Caches) KruiseDaemon(node string, now time.Time, grace time.Duration) (decision.DaemonState, string) {
	if c.NodeImageInformer == nil {
		return decision.DaemonUnknown, "OpenKruise's NodeImage API is not served, so not known; a CRR is tried"
	}
	obj, ok, err := c.NodeImageInformer.GetIndexer().GetByKey(node)
	if err != nil || !ok {
		return KruiseDaemonFromNodeImage(nil, now, grace)
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return KruiseDaemonFromNodeImage(nil, now, grace)
	}
	return KruiseDaemonFromNodeImage(&m.ObjectMeta, now, grace)
}

// KruiseDaemon implements reconciler.Reader's with one live read.
func (l LiveReader) KruiseDaemon(node string, now time.Time, grace time.Duration) (decision.DaemonState, string) {
	if l.Meta == nil {
		return decision.DaemonUnknown, "not looked up"
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	m, err := l.Meta.Resource(nodeImagesResource).Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return KruiseDaemonFromNodeImage(nil, now, grace)
	case err != nil:
		return decision.DaemonUnknown, fmt.Sprintf("its NodeImage could not be read (%v); a CRR is tried", err)
	}
	return KruiseDaemonFromNodeImage(&m.ObjectMeta, now, grace)
}

// NodeImagesServed asks discovery whether apps.kruise.io/v1beta1 serves
// nodeimages.
func NodeImagesServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(nodeImagesResource.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", nodeImagesResource.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == nodeImagesResource.Resource {
			return true, nil
		}
	}
	return false, nil
}
