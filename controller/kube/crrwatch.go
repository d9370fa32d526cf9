package kube

import (
	"fmt"
	"net/http"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisescheme "github.com/openkruise/kruise-api/client/clientset/versioned/scheme"
	kruiseappsv1alpha1 "github.com/openkruise/kruise-api/client/clientset/versioned/typed/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	k8sjson "sigs.k8s.io/json"
)

// The CRR watch's events decoded in one pass each. CRDs are served in JSON
// only, and client-go decodes a JSON watch event in four passes over its
// bytes besides the framing: the event's kind sniffed, the event decoded,
// the object's kind sniffed, the object decoded (runtime/serializer/json:
// SimpleMetaFactory.Interpret, then the unmarshal), each pass a full scan
// and the object's managedFields decoded with the rest. In e2e/bench's
// profile of a 20,000-pod burst that was 0.86 s of the controller's 18.1 s
// sampled, for the 5,000 CRRs it created: the CRR watch is a cost only the
// controller pays, for its follow-through. A watch on this client decodes
// each event straight into its known type (metav1.WatchEvent), and each
// CRR straight into a ContainerRecreateRequest with its managedFields
// skipped, which nothing here reads (TrimCRR drops them). Any other object
// on the stream (a Status in an ERROR event) goes to client-go's decoder.
// Everything else the client does (lists, gets, writes, the answers'
// errors) goes through client-go's own negotiator, unchanged.
// TestTheCRRWatchDecodesAsClientGoDoes holds the result equal to
// client-go's, managedFields aside.

// WithCRRWatchDecoder is kruise with its apps/v1alpha1 client's watches
// decoded as above; cfg is the configuration kruise was made from.
func WithCRRWatchDecoder(kruise kruiseclient.Interface, cfg *rest.Config) (kruiseclient.Interface, error) {
	rc, ok := kruise.AppsV1alpha1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return kruise, nil
	}
	gv := kruisev1alpha1.SchemeGroupVersion
	negotiator := watchNegotiator{ClientNegotiator: runtime.NewClientNegotiator(kruisescheme.Codecs.WithoutConversion(), gv),
		contentType: runtime.ContentTypeJSON,
		decoders: func(objects runtime.Decoder, events runtime.Serializer) (runtime.Decoder, runtime.Serializer) {
			return crrDecoder{objects}, watchEventDecoder{events}
		}}
	narrow, err := withNegotiator(rc, cfg, gv, "/apis", negotiator)
	if err != nil {
		return nil, fmt.Errorf("CRR client: %w", err)
	}
	return crrWatchClientset{Interface: kruise, apps: kruiseappsv1alpha1.New(narrow)}, nil
}

// withNegotiator is a REST client for gv like rc, with the same HTTP client
// and rate limiter (one connection, one QPS budget), whose content is
// negotiated by negotiator: rc made again with another negotiator, as
// rest.RESTClientForConfigAndClient makes it from cfg.
func withNegotiator(rc *rest.RESTClient, cfg *rest.Config, gv schema.GroupVersion, apiPath string, negotiator runtime.ClientNegotiator) (*rest.RESTClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion, cfg.APIPath = &gv, apiPath
	base, versionedPath, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	content := rest.ClientContentConfig{
		AcceptContentTypes: cfg.AcceptContentTypes, ContentType: cfg.ContentType, GroupVersion: gv, Negotiator: negotiator,
	}
	client := rc.Client
	if client == nil {
		client = http.DefaultClient
	}
	return rest.NewRESTClient(base, versionedPath, content, rc.GetRateLimiter(), client)
}

// crrWatchClientset is a kruise clientset whose apps/v1alpha1 client
// decodes watches as WithCRRWatchDecoder says.
type crrWatchClientset struct {
	kruiseclient.Interface
	apps *kruiseappsv1alpha1.AppsV1alpha1Client
}

func (c crrWatchClientset) AppsV1alpha1() kruiseappsv1alpha1.AppsV1alpha1Interface { return c.apps }

// watchNegotiator is client-go's negotiator but for the decoders of a
// watch stream in one content type: decoders gives them, from client-go's
// own. An empty content type is client-go's first, JSON.
type watchNegotiator struct {
	runtime.ClientNegotiator
	contentType string
	decoders    func(objects runtime.Decoder, events runtime.Serializer) (runtime.Decoder, runtime.Serializer)
}

func (n watchNegotiator) StreamDecoder(contentType string, params map[string]string) (runtime.Decoder, runtime.Serializer, runtime.Framer, error) {
	objects, events, framer, err := n.ClientNegotiator.StreamDecoder(contentType, params)
	if contentType == "" {
		contentType = runtime.ContentTypeJSON
	}
	if err != nil || contentType != n.contentType {
		return objects, events, framer, err
	}
	objects, events = n.decoders(objects, events)
	return objects, events, framer, nil
}

// watchEventDecoder decodes a watch event's frame into the
// metav1.WatchEvent it is asked for, whose type it knows; other requests go
// to client-go's serializer.
type watchEventDecoder struct{ runtime.Serializer }

func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	e, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	*e = metav1.WatchEvent{}
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(data, e); err != nil {
		return nil, nil, err
	}
	return e, &schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}, nil
}

var crrKind = kruisev1alpha1.SchemeGroupVersion.WithKind("ContainerRecreateRequest")

// crrDecoder decodes a watch event's object as a CRR, its managedFields
// skipped, when it is one; anything else, or a request for another type,
// goes to client-go's decoder.
type crrDecoder struct{ full runtime.Decoder }

// crrWire is a CRR as JSON spells it, with its metadata's managedFields
// shadowed by a field that keeps nothing (encoding/json's rule: of two
// fields with one name, the shallower wins).
type crrWire struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		metav1.ObjectMeta `json:",inline"`
		ManagedFields     skipped `json:"managedFields,omitempty"`
	} `json:"metadata"`
	Spec   kruisev1alpha1.ContainerRecreateRequestSpec   `json:"spec"`
	Status kruisev1alpha1.ContainerRecreateRequestStatus `json:"status"`
}

// skipped reads a JSON value and keeps none of it.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

func (d crrDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil {
		if _, ok := into.(*kruisev1alpha1.ContainerRecreateRequest); !ok {
			return d.full.Decode(data, defaults, into)
		}
	}
	var w crrWire
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(data, &w); err != nil || w.GroupVersionKind() != crrKind {
		return d.full.Decode(data, defaults, into)
	}
	crr, _ := into.(*kruisev1alpha1.ContainerRecreateRequest)
	if crr == nil {
		crr = new(kruisev1alpha1.ContainerRecreateRequest)
	}
	// No TypeMeta: client-go's decoder for a typed client clears it
	// (runtime.WithoutVersionDecoder).
	*crr = kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: w.Metadata.ObjectMeta, Spec: w.Spec, Status: w.Status}
	gvk := crrKind
	return crr, &gvk, nil
}
