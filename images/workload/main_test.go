package main

import (
	"net"
	"testing"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The shipper's last line is delivered while the proxy listens, and lost
// (an error, exit ExitLost) once nothing listens.
func TestDeliverNeedsTheProxy(t *testing.T) {
	gone := freePort(t)
	if err := deliver(gone); err == nil {
		t.Errorf("delivered to port %d where nothing listens", gone)
	}
	port := freePort(t)
	if err := acknowledge(port); err != nil {
		t.Fatal(err)
	}
	if err := deliver(port); err != nil {
		t.Errorf("not delivered through the proxy: %v", err)
	}
}
