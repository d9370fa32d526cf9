// Command build-images writes the project's image tarballs with no Docker
// engine:
//
//   - OUT/NAME.tar for the local cluster (pause, quick-exit, workload), one
//     architecture, docker-archive format: `ctr -n k8s.io images import`;
//   - OUT/oci/NAME.tar for release (controller, quick-exit, mock-node), an
//     OCI image layout holding an amd64 + arm64 index:
//     `kind load image-archive`, `ctr images import`, `docker load`.
//
// A release pushes each OCI layout with crane (hack/tools), so that the
// registry client's dependencies stay out of the product's go.mod.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

func main() {
	out := flag.String("out", "bin/images", "directory for the tarballs")
	release := flag.Bool("release", true, "also write the multi-arch release images to OUT/oci")
	local := flag.Bool("local", true, "write the local cluster's single-arch images to OUT")
	platforms := flag.String("platforms", strings.Join(images.Platforms, ","), "architectures of the release images (kind loads one: the machine's)")
	flag.Parse()
	ctx := context.Background()
	var err error
	if *local {
		var paths []string
		if paths, err = oci.WriteAll(ctx, *out); err == nil {
			for _, p := range paths {
				fmt.Println(p)
			}
		}
	}
	if err == nil && *release {
		err = writeRelease(ctx, filepath.Join(*out, "oci"), strings.Split(*platforms, ","))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "build-images: %v\n", err)
		os.Exit(1)
	}
}

func writeRelease(ctx context.Context, dir string, platforms []string) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	start := time.Now()
	built, skipped, err := oci.WriteRelease(ctx, root, dir, images.Release, platforms)
	if err != nil {
		return err
	}
	for _, b := range built {
		fmt.Printf("%s %s %s\n", b.Path, b.Spec.Ref, b.Digest)
	}
	for _, s := range skipped {
		fmt.Fprintf(os.Stderr, "build-images: %s skipped: package %s not found\n", s.Ref, s.Package)
	}
	fmt.Fprintf(os.Stderr, "build-images: release images for %v in %s\n", platforms, time.Since(start).Round(time.Second))
	return nil
}
