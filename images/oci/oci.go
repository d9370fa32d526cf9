// Package oci builds the project's images with no Docker engine: a static
// Go binary (CGO_ENABLED=0) in one layer on an empty base, the config set
// from an images.Spec, written as a tarball that `ctr images import` and
// `docker load` both read.
package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// epoch is the timestamp of every file and of the image: the same binary
// gives the same image digest.
var epoch = time.Unix(0, 0).UTC()

// Build compiles spec's binary from the module at repoRoot for the host's
// architecture and returns the image.
func Build(ctx context.Context, repoRoot string, spec images.Spec) (v1.Image, error) {
	return BuildFor(ctx, repoRoot, spec, runtime.GOARCH)
}

// BuildFor compiles spec's binary for linux/goarch and returns the image.
func BuildFor(ctx context.Context, repoRoot string, spec images.Spec, goarch string) (v1.Image, error) {
	tmp, err := os.MkdirTemp("", "oci-build-")
	if err != nil {
		return nil, fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	pkg := spec.Package
	if pkg == "" {
		pkg = "./images/" + spec.Dir
	}
	// Static: the image has no libc.
	cmd := images.GoBuild(ctx, repoRoot, bin, pkg, "GOOS=linux", "GOARCH="+goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s binary for %s: %w: %s", spec.Dir, goarch, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read %s binary: %w", spec.Dir, err)
	}
	layer, err := binaryLayer(spec, data)
	if err != nil {
		return nil, err
	}
	layers := []v1.Layer{layer}
	if spec.Base != "" {
		base, err := baseLayer(spec.Base)
		if err != nil {
			return nil, err
		}
		layers = []v1.Layer{base, layer}
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("add layer to %s: %w", spec.Ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config of %s: %w", spec.Ref, err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = goarch, "linux", v1.Time{Time: epoch}
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.User = spec.User
	cf.Config.Env = spec.Env
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config of %s: %w", spec.Ref, err)
	}
	return img, nil
}

// binaryLayer is one uncompressed tar with the parent dirs, the binary at
// spec.Path and hard links to it at spec.Links.
func binaryLayer(spec images.Spec, bin []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, p := range append([]string{spec.Path}, spec.Links...) {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			dirs[strings.TrimPrefix(d, "/")+"/"] = true
		}
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted) // parents sort before children
	for _, d := range sorted {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, fmt.Errorf("tar dir %s: %w", d, err)
		}
	}
	main := strings.TrimPrefix(spec.Path, "/")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: main, Mode: 0o755, Size: int64(len(bin)), ModTime: epoch}); err != nil {
		return nil, fmt.Errorf("tar %s: %w", main, err)
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("tar %s: %w", main, err)
	}
	for _, l := range spec.Links {
		h := &tar.Header{Typeflag: tar.TypeLink, Name: strings.TrimPrefix(l, "/"), Linkname: main, Mode: 0o755, ModTime: epoch}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar link %s: %w", l, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close tar: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer for %s: %w", spec.Ref, err)
	}
	return layer, nil
}

// WriteTarball builds spec and writes it to dir/<image dir>.tar, returning
// the path.
func WriteTarball(ctx context.Context, repoRoot, dir string, spec images.Spec) (string, error) {
	img, err := Build(ctx, repoRoot, spec)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(spec.Ref)
	if err != nil {
		return "", fmt.Errorf("parse ref %s: %w", spec.Ref, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	out := filepath.Join(dir, spec.Dir+".tar")
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return "", fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("install %s: %w", out, err)
	}
	return out, nil
}

// WriteAll builds every image into dir and returns the tarball paths.
func WriteAll(ctx context.Context, dir string) ([]string, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, s := range images.All {
		p, err := WriteTarball(ctx, root, dir, s)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}
