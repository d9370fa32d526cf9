package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// KruiseImage is the name OpenKruise's chart gives kruise-manager and
// kruise-daemon (one image, two commands: /manager and /kruise-daemon, as
// the module's config/manager/manager.yaml runs them). Offline, the nodes
// pull it from the local registry, their mirror for docker.io.
var KruiseImage = "docker.io/openkruise/kruise-manager:" + cluster.KruiseVersion

// kruiseImage writes OpenKruise's image, built from the pinned kruise module
// (the local cluster's build), as a docker-archive tarball at out.
func (b *builder) kruiseImage(ctx context.Context, out string) error {
	rootfs, err := b.rootfs(ctx)
	if err != nil {
		return err
	}
	bins, err := cluster.KruiseBinaries(ctx)
	if err != nil {
		return err
	}
	root, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return err
	}
	img, err := componentImage(root, bins[cluster.KruiseManager], "/manager", []string{"/manager"})
	if err != nil {
		return err
	}
	daemon, err := componentImage(root, bins[cluster.KruiseDaemon], "/kruise-daemon", nil)
	if err != nil {
		return err
	}
	dl, err := daemon.Layers()
	if err != nil {
		return err
	}
	// kruise-manager runs as 65534 (config/manager/manager.yaml) and makes
	// its protection log under /log, which OpenKruise's Dockerfile creates
	// owned by nobody: without it the manager exits at start ("unable to
	// init protection logger": mkdir /log: permission denied).
	logDir, err := dirLayer("log", 65534)
	if err != nil {
		return err
	}
	if img, err = mutate.AppendLayers(img, dl[len(dl)-1], logDir); err != nil {
		return err
	}
	ref, err := name.NewTag(KruiseImage)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// kruiseDir is the pinned kruise module in the module cache (its config/
// holds the manifests OpenKruise installs from).
func (b *builder) kruiseDir(ctx context.Context) (string, error) {
	out, err := b.output(ctx, "", "go", "mod", "download", "-json", "github.com/openkruise/kruise@"+cluster.KruiseVersion)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), `"Dir": "`); ok {
			return strings.TrimSuffix(v, `",`), nil
		}
	}
	return "", fmt.Errorf("go mod download github.com/openkruise/kruise: no Dir")
}

// dirLayer is a layer holding one empty directory owned by uid:uid.
func dirLayer(dir string, uid int) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, Uid: uid, Gid: uid, Typeflag: tar.TypeDir}); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (ioReadCloser, error) { return nopCloser{bytes.NewReader(raw)}, nil })
}
