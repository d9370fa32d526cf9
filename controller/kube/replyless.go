package kube

import (
	"context"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// The controller's writes read only the answer's status, never its body: the
// body is the object as written, which nothing here uses. The generated
// clients decode it all the same: in e2e/bench's profile of a 2,000-pod
// burst, decoding the answers (a CRR in JSON, a pod or an event in
// protobuf) took 0.10 s of the 2.34 s sampled, besides its garbage. These send
// the same requests as the generated clients, with the same options, and
// read the answer with rest.Result.Error, which gives the same errors
// (apierrors.IsAlreadyExists, IsConflict, IsInvalid... hold as before) and
// decodes a body only when the answer is an error.

// restClient is the client's RESTClient, or nil where there is none to
// send through: the fake clientsets of unit tests answer a nil pointer, and
// the callers then use the generated methods.
func restClient(c rest.Interface) rest.Interface {
	if rc, ok := c.(*rest.RESTClient); !ok || rc == nil {
		return nil
	}
	return c
}

// createCRR is ContainerRecreateRequests(ns).Create with
// CreateOptions{FieldManager: fieldManager}, without decoding the answer.
// The one option is set as the query parameter it becomes: converting the
// options struct through the parameter codec (VersionedParams) was 1% of
// the controller's CPU in a 20,000-pod burst, once per write, for the same
// "fieldManager=..." every time.
func createCRR(ctx context.Context, rc rest.Interface, crr *kruisev1alpha1.ContainerRecreateRequest, fieldManager string) error {
	return rc.Post().Namespace(crr.Namespace).Resource("containerrecreaterequests").
		Param("fieldManager", fieldManager).Body(crr).Do(ctx).Error()
}

// patchPod is Pods(ns).Patch with PatchOptions{FieldManager: fieldManager}
// (set as createCRR sets it), without decoding the answer; subresource is
// "" or "status". Like the generated client, it asks for protobuf.
func patchPod(ctx context.Context, rc rest.Interface, namespace, name string, pt types.PatchType, data []byte, fieldManager, subresource string) error {
	req := rc.Patch(pt).UseProtobufAsDefault().Namespace(namespace).Resource("pods").Name(name)
	if subresource != "" {
		req = req.SubResource(subresource)
	}
	return req.Param("fieldManager", fieldManager).Body(data).Do(ctx).Error()
}

// EventSink writes events as client-go's EventSinkImpl does (in the
// event's namespace, in the client's content type), without decoding the
// answer: it returns the event it sent. Of that answer the event recorder
// keeps the event's name and count, for a later patch of the same event
// (record.EventCorrelator's UpdateState), and the name is the client's own
// (record makes it).
type EventSink struct {
	// Client is the core/v1 REST client of the events' clientset.
	Client rest.Interface
}

func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	err := s.Client.Post().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").
		Body(e).Do(context.Background()).Error()
	return e, err
}

func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	err := s.Client.Put().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).
		Body(e).Do(context.Background()).Error()
	return e, err
}

func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	err := s.Client.Patch(types.StrategicMergePatchType).NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).
		Body(data).Do(context.Background()).Error()
	return e, err
}
