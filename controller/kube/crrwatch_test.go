package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/randfill"
)

// filledCRRs are CRRs with every field set (randfill), times and
// managedFields as the API server writes them.
func filledCRRs(t testing.TB, n int) []kruisev1alpha1.ContainerRecreateRequest {
	t.Helper()
	f := randfill.NewWithSeed(40).NilChance(0).NumElements(1, 3).Funcs(
		func(x *intstr.IntOrString, c randfill.Continue) { *x = intstr.FromInt32(c.Int31()) },
		func(x *metav1.Time, c randfill.Continue) {
			*x = metav1.NewTime(time.Unix(c.Int63n(1<<32), 0))
		},
		func(x *metav1.FieldsV1, c randfill.Continue) {
			x.Raw = []byte(`{"f:metadata":{"f:labels":{"f:x":{}}},"f:spec":{"f:podName":{}}}`)
		},
	)
	out := make([]kruisev1alpha1.ContainerRecreateRequest, n)
	for i := range out {
		f.Fill(&out[i])
		out[i].TypeMeta = metav1.TypeMeta{APIVersion: kruisev1alpha1.SchemeGroupVersion.String(), Kind: "ContainerRecreateRequest"}
		if len(out[i].ManagedFields) == 0 {
			t.Fatal("randfill left managedFields empty")
		}
	}
	return out
}

// watchFrames is a JSON watch stream: each event as the API server
// writes it, one per line.
func watchFrames(t testing.TB, events []watch.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range events {
		obj, err := json.Marshal(e.Object)
		if err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: obj}})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

// serveWatch answers a watch with the stream and any other GET with body,
// in JSON.
func serveWatch(t testing.TB, stream, body []byte) *rest.Config {
	return serveIn(t, runtime.ContentTypeJSON, stream, body)
}

// serveIn answers a watch with the stream and any other GET with body, in
// mediaType, whose watch streams it names as the API server does (a
// stream=watch parameter on all but JSON's: apiserver's
// endpoints/handlers/watch.go).
func serveIn(t testing.TB, mediaType string, stream, body []byte) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			streamType := mediaType
			if mediaType != runtime.ContentTypeJSON {
				streamType += ";stream=watch"
			}
			w.Header().Set("Content-Type", streamType)
			_, _ = w.Write(stream)
			return
		}
		w.Header().Set("Content-Type", mediaType)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// bothClients are a kruise client as client-go makes it, and the same
// with WithCRRWatchDecoder.
func bothClients(t testing.TB, cfg *rest.Config) (standard, ours kruiseclient.Interface) {
	t.Helper()
	standard, err := kruiseclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ours, err = WithCRRWatchDecoder(standard, cfg); err != nil {
		t.Fatal(err)
	}
	return standard, ours
}

func collect(t testing.TB, kruise kruiseclient.Interface) []watch.Event {
	t.Helper()
	w, err := kruise.AppsV1alpha1().ContainerRecreateRequests("").Watch(context.Background(), metav1.ListOptions{})
	return drain(t, w, err)
}

// drain is every event of a watch, until the server ends it.
func drain(t testing.TB, w watch.Interface, err error) []watch.Event {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []watch.Event
	for e := range w.ResultChan() {
		got = append(got, e)
	}
	return got
}

// The CRR watch's own decoding (WithCRRWatchDecoder) gives each event
// exactly what client-go's decoding of the same stream gives, managedFields
// aside: every field of every CRR, a bookmark's annotations (the watch
// list's end), an ERROR event's Status.
func TestTheCRRWatchDecodesAsClientGoDoes(t *testing.T) {
	crrs := filledCRRs(t, 4)
	bookmark := &kruisev1alpha1.ContainerRecreateRequest{
		TypeMeta: crrs[0].TypeMeta,
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1234",
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
	}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (1234)"}
	events := []watch.Event{
		{Type: watch.Added, Object: &crrs[0]}, {Type: watch.Modified, Object: &crrs[1]},
		{Type: watch.Bookmark, Object: bookmark}, {Type: watch.Deleted, Object: &crrs[2]},
		{Type: watch.Modified, Object: &crrs[3]}, {Type: watch.Error, Object: gone},
	}
	standard, ours := bothClients(t, serveWatch(t, watchFrames(t, events), nil))
	want, got := collect(t, standard), collect(t, ours)
	if len(want) != len(events) || len(got) != len(events) {
		t.Fatalf("client-go decoded %d events, ours %d; %d were sent", len(want), len(got), len(events))
	}
	for i := range want {
		if crr, ok := want[i].Object.(*kruisev1alpha1.ContainerRecreateRequest); ok {
			if i != 2 && len(crr.ManagedFields) == 0 {
				t.Fatalf("event %d: client-go's decoding kept no managedFields; the comparison would prove nothing", i)
			}
			crr.ManagedFields = nil
		}
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Errorf("event %d (%s):\n client-go %#v\n ours      %#v", i, events[i].Type, want[i].Object, got[i].Object)
		}
	}
	if crr, ok := got[0].Object.(*kruisev1alpha1.ContainerRecreateRequest); !ok || crr.Spec.PodName == "" || crr.Labels == nil {
		t.Fatalf("the first event decoded to %#v", got[0].Object)
	}
}

// Only the watch is decoded apart: a list through the same client keeps
// every field, managedFields included, as client-go decodes it.
func TestTheCRRClientDecodesAllButWatchesAsClientGoDoes(t *testing.T) {
	crrs := filledCRRs(t, 2)
	list := kruisev1alpha1.ContainerRecreateRequestList{TypeMeta: metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "ContainerRecreateRequestList"}, Items: crrs}
	body, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	standard, ours := bothClients(t, serveWatch(t, nil, body))
	want, err := standard.AppsV1alpha1().ContainerRecreateRequests("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ours.AppsV1alpha1().ContainerRecreateRequests("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 2 || len(got.Items[0].ManagedFields) == 0 || !reflect.DeepEqual(want, got) {
		t.Fatalf("a list through our client differs from client-go's:\n client-go %#v\n ours      %#v", want, got)
	}
}

// A client that is not a REST client's (a unit test's fake clientset) is
// kept as it is.
func TestAFakeKruiseClientIsKeptAsItIs(t *testing.T) {
	fake := kruisefake.NewSimpleClientset()
	got, err := WithCRRWatchDecoder(fake, &rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil || got != fake {
		t.Fatalf("got %T, %v; want the fake itself", got, err)
	}
}

// servedCRR is one of the controller's CRRs as a watch sends it: what
// reconciler.newCRR writes, with what kruise's webhook and the API server
// add (kruise's labels, the container's status context, two managedFields
// entries).
func servedCRR() *kruisev1alpha1.ContainerRecreateRequest {
	grace, deadline, ttl := int64(30), int64(330), int32(330)
	at := metav1.NewTime(time.Unix(1_800_000_000, 0))
	yes := true
	fields := metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:sidecar-terminator.io/attempt":{},"f:sidecar-terminator.io/managed-by":{},"f:sidecar-terminator.io/pod-uid":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b\"}":{}}},"f:spec":{".":{},"f:activeDeadlineSeconds":{},"f:containers":{},"f:podName":{},"f:strategy":{".":{},"f:failurePolicy":{},"f:forceRecreate":{},"f:terminationGracePeriodSeconds":{}},"f:ttlSecondsAfterFinished":{}}}`)}
	return &kruisev1alpha1.ContainerRecreateRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "ContainerRecreateRequest"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "job-1234-abcde-6f1e2d3c-st1", Namespace: "default", UID: "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
			ResourceVersion: "123456789", Generation: 1, CreationTimestamp: at,
			Labels: map[string]string{"sidecar-terminator.io/managed-by": "sidecar-terminator", "sidecar-terminator.io/pod-uid": "6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
				"sidecar-terminator.io/attempt": "1", "crr.apps.kruise.io/node-name": "node-17", "crr.apps.kruise.io/pod-uid": "6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "job-1234-abcde", UID: "6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", Controller: &yes, BlockOwnerDeletion: &yes}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "sidecar-terminator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps.kruise.io/v1alpha1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &fields},
				{Manager: "kruise-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps.kruise.io/v1alpha1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &fields},
			},
		},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{
			PodName: "job-1234-abcde",
			Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "sidecar",
				StatusContext: &kruisev1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}},
			Strategy: &kruisev1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: kruisev1alpha1.ContainerRecreateRequestFailurePolicyIgnore,
				ForceRecreate: true, TerminationGracePeriodSeconds: &grace},
			ActiveDeadlineSeconds: &deadline, TTLSecondsAfterFinished: &ttl,
		},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestPending},
	}
}

func BenchmarkCRRWatchDecode(b *testing.B) {
	events := make([]watch.Event, 200)
	for i := range events {
		events[i] = watch.Event{Type: watch.Added, Object: servedCRR()}
	}
	stream := watchFrames(b, events)
	for _, side := range []string{"client-go", "ours"} {
		b.Run(side, func(b *testing.B) {
			kruise, ours := bothClients(b, serveWatch(b, stream, nil))
			if side == "ours" {
				kruise = ours
			}
			b.ReportAllocs()
			for b.Loop() {
				if n := len(collect(b, kruise)); n != len(events) {
					b.Fatalf("%d events", n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		})
	}
}
