// Command render-base writes the kustomize base (controller/deploy/base)
// from the Helm chart: `make manifests`.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "render-base:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		return err
	}
	files, err := deploy.RenderBase(ctx, helm, root)
	if err != nil {
		return err
	}
	return deploy.WriteBase(deploy.BaseDir(root), files)
}
