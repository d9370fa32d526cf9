package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// An image pushed to the registry comes back with the same digest, its blobs
// on disk, and the registry stops when its context ends.
func TestAPushedImageIsPulledBackByDigest(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, "127.0.0.1:0", addrFile, filepath.Join(dir, "blobs")) }()
	var addr string
	for i := 0; i < 100 && addr == ""; i++ {
		b, _ := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("address %q, want one on 127.0.0.1", addr)
	}
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(addr + "/test/img:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	got, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want {
		t.Fatalf("digest %s, want %s", got.Digest, want)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if len(entries) < 3 { // two layers and the config
		t.Fatalf("%d blobs on disk, want at least 3", len(entries))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stop: %v", err)
	}
}
