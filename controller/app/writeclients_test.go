package app

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The writes' clients dial connections of their own, while every client of
// the watches' configuration shares one (client-go's transport cache): at
// the API server, a connection's streams are served in turn by one loop.
func TestWritesGoOverConnectionsOfTheirOwn(t *testing.T) {
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns[c] = true
			mu.Unlock()
		}
	}
	srv.StartTLS()
	defer srv.Close()
	opened := func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }

	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: certPEM(t, srv)}}
	clients, err := NewClientsForConfig(cfg, ClientLimitOff, ClientLimitOff)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func(c *Clients) {
		t.Helper()
		_, _ = c.Kube.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		_, _ = c.Kruise.AppsV1alpha1().ContainerRecreateRequests("ns").Get(ctx, "c", metav1.GetOptions{})
	}
	get(clients)
	get(clients)
	if n := opened(); n != 1 {
		t.Fatalf("the watches' clients opened %d connections, want the one they share", n)
	}
	writes, err := clients.ForWrites()
	if err != nil {
		t.Fatal(err)
	}
	get(writes)
	get(writes)
	// Pods are patched and CRRs made through two clientsets, each with a
	// connection of its own.
	if n := opened(); n != 3 {
		t.Errorf("%d connections after the writes' clients' requests, want 3: the watches' one and the writes' own two", n)
	}
	get(clients)
	if n := opened(); n != 3 {
		t.Errorf("the watches' clients opened another connection (%d in all)", n)
	}
}

// certPEM is the test server's certificate, for a client to trust.
func certPEM(t *testing.T, srv *httptest.Server) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}
