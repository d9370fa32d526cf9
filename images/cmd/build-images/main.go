// Command build-images writes the project's image tarballs (pause,
// quick-exit, workload) with no Docker engine. Load them with
// `ctr -n k8s.io images import DIR/NAME.tar` or `docker load -i DIR/NAME.tar`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

func main() {
	out := flag.String("out", "bin/images", "directory for the tarballs")
	flag.Parse()
	paths, err := oci.WriteAll(context.Background(), *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "build-images: %v\n", err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println(p)
	}
}
