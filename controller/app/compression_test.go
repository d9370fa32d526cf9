package app

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The controller's clients and its events client (built from the same
// configuration) ask for answers and watch streams uncompressed: Go's
// transport would otherwise ask for gzip, and the API server compresses
// every watch event for a client that does.
func TestClientsAskForUncompressedAnswers(t *testing.T) {
	var mu sync.Mutex
	var encodings []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings = append(encodings, r.URL.Path+" Accept-Encoding="+r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer srv.Close()

	// Over TLS, as every API server is: without TLS options client-go
	// uses Go's default transport, whatever the configuration says.
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := NewClientsForConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, ClientLimitOff, ClientLimitOff)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.Kube.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	_, _ = c.Kruise.AppsV1alpha1().ContainerRecreateRequests("ns").Get(ctx, "c", metav1.GetOptions{})
	if w, err := c.Kube.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{}); err == nil {
		w.Stop()
	}
	events, err := NewClientsForConfig(eventsRESTConfig(c.Config), ClientLimitOff, ClientLimitOff)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = events.Kube.CoreV1().Events("ns").Get(ctx, "e", metav1.GetOptions{})

	mu.Lock()
	defer mu.Unlock()
	if len(encodings) != 4 {
		t.Fatalf("server saw %d requests, want 4: %v", len(encodings), encodings)
	}
	for _, e := range encodings {
		if !strings.HasSuffix(e, "Accept-Encoding=") {
			t.Errorf("request asked for a compressed answer: %s", e)
		}
	}
}
