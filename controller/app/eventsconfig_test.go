package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
)

// The event sink's writes go in protobuf, and ask for protobuf back: the
// events client's legacy create method, and a REST client of the shared
// configuration, would otherwise speak JSON.
func TestEventsAreWrittenInProtobuf(t *testing.T) {
	var mu sync.Mutex
	var contentType, accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") {
			mu.Lock()
			contentType, accept = r.Header.Get("Content-Type"), r.Header.Get("Accept")
			mu.Unlock()
		}
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	base := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(eventsRESTConfig(base))
	if err != nil {
		t.Fatal(err)
	}
	sink := kube.EventSink{Client: client.CoreV1().RESTClient()}
	_, _ = sink.Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}, Reason: "r"})
	mu.Lock()
	defer mu.Unlock()
	if contentType != runtime.ContentTypeProtobuf || !strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
		t.Errorf("event written as %q, accepting %q; want protobuf", contentType, accept)
	}
	if base.ContentType != "" {
		t.Errorf("the shared configuration was changed: %q", base.ContentType)
	}
}
