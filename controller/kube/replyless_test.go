package kube

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// request is what the fake API server was sent.
type request struct {
	method, path, query, contentType, accept, body string
}

// replyServer answers every request with the status and body the test
// sets, recording what it was sent.
type replyServer struct {
	mu          sync.Mutex
	got         []request
	status      int
	contentType string
	body        string
}

func (s *replyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), string(b)})
	w.Header().Set("Content-Type", s.contentType)
	w.WriteHeader(s.status)
	_, _ = io.WriteString(w, s.body)
}

func (s *replyServer) answer(status int, contentType, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.contentType, s.body, s.got = status, contentType, body, nil
}

func (s *replyServer) last(t *testing.T) request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) != 1 {
		t.Fatalf("%d requests sent, want 1: %+v", len(s.got), s.got)
	}
	return s.got[0]
}

func newReplyWriter(t *testing.T) (Writer, *replyServer) {
	srv := &replyServer{}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	cfg := &rest.Config{Host: ts.URL}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	krc, err := kruiseclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Writer{Client: kc, Kruise: krc}, srv
}

// notAnObject is a success answer no decoder can read: a write that
// decoded its answer would fail on it.
const notAnObject = "\x00not an object"

func statusBody(reason metav1.StatusReason, code int32) string {
	b, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: "m", Reason: reason, Code: code})
	return string(b)
}

// The writes send what the generated clients send, read the answer's status
// only (a body no decoder reads is a success), and give the errors the
// reconciler classifies (AlreadyExists, Conflict, Invalid) as before.
func TestWritesReadTheAnswersStatusOnly(t *testing.T) {
	ctx := context.Background()
	w, srv := newReplyWriter(t)
	crr := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-1-sidecars"},
		Spec:       kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "job-1"},
	}

	srv.answer(http.StatusCreated, "application/json", notAnObject)
	if err := w.CreateCRR(ctx, crr, false); err != nil {
		t.Fatalf("create CRR answered 201: %v", err)
	}
	got := srv.last(t)
	if got.method != http.MethodPost || got.path != "/apis/apps.kruise.io/v1alpha1/namespaces/ns/containerrecreaterequests" ||
		got.query != "fieldManager="+FieldManager || !strings.Contains(got.body, `"podName":"job-1"`) {
		t.Errorf("create CRR sent %+v", got)
	}

	srv.answer(http.StatusUnprocessableEntity, "application/json", statusBody(metav1.StatusReasonInvalid, 422))
	if err := w.CreateCRR(ctx, crr, false); !apierrors.IsInvalid(err) {
		t.Errorf("create CRR answered 422 Invalid: err %v, want Invalid", err)
	}

	for _, c := range []struct {
		name        string
		write       func() error
		path, query string
		patchType   types.PatchType
		body        string
	}{
		{"swap", func() error { return w.PatchPod(ctx, "ns", "job-1", []byte(`[{"op":"test"}]`)) },
			"/api/v1/namespaces/ns/pods/job-1", "fieldManager=" + FieldManager, types.JSONPatchType, `[{"op":"test"}]`},
		{"settle", func() error { return w.PatchPodStatus(ctx, "ns", "job-1", []byte(`[{"op":"add"}]`)) },
			"/api/v1/namespaces/ns/pods/job-1/status", "fieldManager=" + FieldManager, types.JSONPatchType, `[{"op":"add"}]`},
		{"annotate", func() error { return w.AnnotatePod(ctx, "ns", "job-1", "uid-1", "k", "v") },
			"/api/v1/namespaces/ns/pods/job-1", "fieldManager=" + FieldManager, types.MergePatchType,
			`{"metadata":{"annotations":{"k":"v"},"uid":"uid-1"}}`},
	} {
		srv.answer(http.StatusOK, "application/vnd.kubernetes.protobuf", notAnObject)
		if err := c.write(); err != nil {
			t.Errorf("%s answered 200: %v", c.name, err)
		}
		got := srv.last(t)
		if got.method != http.MethodPatch || got.path != c.path || got.query != c.query || got.contentType != string(c.patchType) ||
			got.body != c.body || !strings.HasPrefix(got.accept, "application/vnd.kubernetes.protobuf") {
			t.Errorf("%s sent %+v", c.name, got)
		}
		srv.answer(http.StatusConflict, "application/json", statusBody(metav1.StatusReasonConflict, 409))
		if err := c.write(); !apierrors.IsConflict(err) {
			t.Errorf("%s answered 409 Conflict: err %v, want Conflict", c.name, err)
		}
		srv.answer(http.StatusUnprocessableEntity, "application/json", statusBody(metav1.StatusReasonInvalid, 422))
		if err := c.write(); !apierrors.IsInvalid(err) {
			t.Errorf("%s answered 422 Invalid: err %v, want Invalid", c.name, err)
		}
	}
}

// The event sink returns the event it sent (the recorder reads its name and
// count back), and the write's error.
func TestEventSinkReturnsTheEventItSent(t *testing.T) {
	w, srv := newReplyWriter(t)
	sink := EventSink{Client: w.Client.CoreV1().RESTClient()}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-1.abc"}, Reason: "SidecarTerminating", Count: 1}

	srv.answer(http.StatusCreated, "application/json", notAnObject)
	got, err := sink.Create(ev)
	if err != nil || got != ev {
		t.Errorf("create answered 201: %v, %v; want the event sent", got, err)
	}
	if r := srv.last(t); r.method != http.MethodPost || r.path != "/api/v1/namespaces/ns/events" || !strings.Contains(r.body, "SidecarTerminating") {
		t.Errorf("create sent %+v", r)
	}

	srv.answer(http.StatusOK, "application/json", notAnObject)
	if got, err := sink.Patch(ev, []byte(`{"count":2}`)); err != nil || got != ev {
		t.Errorf("patch answered 200: %v, %v", got, err)
	}
	if r := srv.last(t); r.method != http.MethodPatch || r.path != "/api/v1/namespaces/ns/events/job-1.abc" ||
		r.contentType != string(types.StrategicMergePatchType) || r.body != `{"count":2}` {
		t.Errorf("patch sent %+v", r)
	}

	srv.answer(http.StatusNotFound, "application/json", statusBody(metav1.StatusReasonNotFound, 404))
	if _, err := sink.Patch(ev, []byte(`{}`)); !apierrors.IsNotFound(err) {
		t.Errorf("patch answered 404: %v, want NotFound (the recorder then creates the event)", err)
	}
	srv.answer(http.StatusForbidden, "application/json", statusBody(metav1.StatusReasonForbidden, 403))
	if _, err := sink.Update(ev); !apierrors.IsForbidden(err) {
		t.Errorf("update answered 403: %v, want Forbidden", err)
	}
}
