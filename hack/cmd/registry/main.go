// Command registry serves an OCI distribution registry for one run: the
// release rehearsal pushes to it and the local cluster's nodes (and kind's,
// offline) pull from it. It is go-containerregistry's registry
// (pkg/registry), blobs on disk, manifests in memory: what it holds is gone
// when it stops. It listens where it is told (127.0.0.1 and a free port by
// default), writes the address it got to -addr-file, and stops on SIGINT or
// SIGTERM.
//
//	go run ./hack/cmd/registry -addr 127.0.0.1:0 -addr-file /tmp/reg.addr -blobs /tmp/reg-blobs
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (host:port; port 0 picks a free one)")
	addrFile := flag.String("addr-file", "", "write the address listened on to this file once serving")
	blobs := flag.String("blobs", "", "keep blobs in this directory (default: in memory)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, *addrFile, *blobs); err != nil {
		log.Fatal(err)
	}
}

// serve runs the registry until ctx ends.
func serve(ctx context.Context, addr, addrFile, blobs string) error {
	opts := []registry.Option{registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags))}
	if blobs != "" {
		if err := os.MkdirAll(blobs, 0o755); err != nil {
			return err
		}
		opts = append(opts, registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs)))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(opts...), ReadHeaderTimeout: 30 * time.Second}
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			ln.Close()
			return err
		}
	}
	fmt.Println(ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		// A connection a client dialled and never used (StateNew) counts
		// as idle only after 5 s (net/http's closeIdleConns), so Shutdown
		// can time out on a pusher's spare connection: close what is left.
		return srv.Close()
	}
	return nil
}
