// Command release publishes a release (package hack/release): the images
// for amd64 and arm64 pushed by digest, each signed and its SPDX SBOMs
// attested, and the Helm chart pushed as an OCI artifact. The release
// workflow runs it on GitHub with keyless signing; `make release-check`
// runs it against a registry on 127.0.0.1 with a key made for the run.
//
//	go run ./hack/cmd/release -registry ghcr.io -chart-repo ghcr.io/sidecar-terminator/charts -version 0.1.0 -sign keyless
//	go run ./hack/cmd/release -registry 127.0.0.1:5000 -chart-repo 127.0.0.1:5000/charts -version 0.1.0 -sign key -key bin/release/cosign.key -verify
//	go run ./hack/cmd/release -registry registry.example.com/team -chart-repo registry.example.com/team/charts -version 0.1.0 -sign none -refs
//
// The last is `make push`: no SBOMs, no signatures, no key. It prints the
// release (release.json) on standard output, or with -refs each pushed
// reference and its digest, one a line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sidecar-terminator/sidecar-terminator/hack/release"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

func main() {
	var o release.Options
	flag.StringVar(&o.Registry, "registry", "", "registry host[:port] the images are pushed to (their paths: sidecar-terminator/controller, sidecar-terminator/quick-exit)")
	flag.StringVar(&o.ChartRepo, "chart-repo", "", "OCI repository of the chart, without oci:// (host[:port]/path)")
	flag.StringVar(&o.Version, "version", "", "release version (semver, no leading v)")
	flag.StringVar(&o.Sign, "sign", release.Keyless, "signing: keyless (the ambient OIDC identity, Fulcio and Rekor), key, or none (no SBOMs, no signatures)")
	flag.StringVar(&o.Key, "key", "", "cosign private key for -sign key (made, with its .pub, when missing)")
	flag.StringVar(&o.Out, "out", "bin/release", "directory for layouts, SBOMs, the chart and release.json")
	plain := flag.String("plain-http", "auto", "the registry speaks HTTP: true, false, or auto (true for 127.0.0.1 and localhost)")
	verify := flag.Bool("verify", false, "then verify the release from the registry with the key's public half (-sign key only)")
	refs := flag.Bool("refs", false, "print each pushed reference with its digest instead of the release's JSON")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, *plain, *verify, *refs); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o release.Options, plain string, verify, refs bool) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	o.Root = root
	if !filepath.IsAbs(o.Out) {
		o.Out = filepath.Join(root, o.Out)
	}
	if o.Key != "" && !filepath.IsAbs(o.Key) {
		o.Key = filepath.Join(root, o.Key)
	}
	switch plain {
	case "true", "false":
		o.PlainHTTP = plain == "true"
	case "auto":
		hostPort, _, _ := strings.Cut(o.Registry, "/")
		host, _, _ := strings.Cut(hostPort, ":")
		o.PlainHTTP = host == "127.0.0.1" || host == "localhost"
	default:
		return fmt.Errorf("-plain-http %q: want true, false or auto", plain)
	}
	o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "release: "+f+"\n", a...) }
	res, err := release.Publish(ctx, o)
	if err != nil {
		return err
	}
	if verify {
		if o.Sign != release.Key {
			return fmt.Errorf("-verify needs -sign key (a keyless release is verified against the workflow's identity: docs/release.md)")
		}
		rep, err := release.Verify(ctx, o, release.PublicKeyPath(o.Key), res)
		if err != nil {
			return err
		}
		for _, l := range rep.Lines {
			o.Logf("verified: %s", l)
		}
	}
	if refs {
		_, err := fmt.Print(release.Refs(res))
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
