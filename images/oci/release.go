package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// distrolessFiles are the files of distroless static's nonroot variant that
// a Go binary can notice: the users and groups (so USER 65532 has a name and
// a home), a writable /tmp and the nonroot home. CA certificates are left
// out: in a cluster the controller trusts the ServiceAccount's CA bundle,
// and copying the host's would make the image depend on the build machine.
var distrolessFiles = []tar.Header{
	{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755},
	{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644},
	{Typeflag: tar.TypeReg, Name: "etc/nsswitch.conf", Mode: 0o644},
	{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644},
	{Typeflag: tar.TypeDir, Name: "home/", Mode: 0o755},
	{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o700, Uid: 65532, Gid: 65532},
	{Typeflag: tar.TypeDir, Name: "root/", Mode: 0o700},
	{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777},
}

var distrolessContent = map[string]string{
	"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
	"etc/group":         "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n",
	"etc/nsswitch.conf": "hosts: files dns\n",
}

// baseLayer is the layer standing for base, the Dockerfile's FROM image.
func baseLayer(base string) (v1.Layer, error) {
	if base != images.DistrolessStatic {
		return nil, fmt.Errorf("base %q: the OCI build only knows %q", base, images.DistrolessStatic)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range distrolessFiles {
		h.ModTime = epoch
		content := distrolessContent[h.Name]
		h.Size = int64(len(content))
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", h.Name, err)
		}
		if _, err := io.WriteString(tw, content); err != nil {
			return nil, fmt.Errorf("tar %s: %w", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close base tar: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// BuildIndex builds spec for each of platforms (linux architectures) and
// returns an OCI image index over them. Every input is fixed (epoch times,
// -trimpath, sorted tar entries), so the index digest depends only on the
// sources and the Go toolchain.
func BuildIndex(ctx context.Context, repoRoot string, spec images.Spec, platforms []string) (v1.ImageIndex, error) {
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range platforms {
		img, err := BuildFor(ctx, repoRoot, spec, arch)
		if err != nil {
			return nil, err
		}
		img, err = asOCI(img)
		if err != nil {
			return nil, fmt.Errorf("%s for %s: %w", spec.Ref, arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	return idx, nil
}

// asOCI rewrites img with OCI media types (manifest, config, layers):
// registries and containerd accept Docker types inside an OCI index, but a
// release should not mix the two.
func asOCI(img v1.Image) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	out := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range layers {
		if out, err = mutate.Append(out, mutate.Addendum{Layer: l, MediaType: types.OCILayer}); err != nil {
			return nil, err
		}
	}
	return mutate.ConfigFile(out, cf)
}

// containerdImageName is the annotation containerd (ctr import, hence `kind load
// image-archive`) and docker load read for the image's full name.
const containerdImageName = "io.containerd.image.name"

// WriteIndexTarball writes idx as an OCI image layout in one tar (what
// `kind load image-archive`, `ctr images import` and `docker load` read),
// named ref. The tar's entries are sorted and timestamped at the epoch, so
// the same index gives the same bytes.
func WriteIndexTarball(path, ref string, idx v1.ImageIndex) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("parse ref %s: %w", ref, err)
	}
	blobs := map[string][]byte{}
	if err := collectIndex(idx, blobs); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return err
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	top := map[string]any{
		"schemaVersion": 2,
		"mediaType":     types.OCIImageIndex,
		"manifests": []any{map[string]any{
			"mediaType": mt, "digest": digest.String(), "size": len(raw),
			"annotations": map[string]string{
				containerdImageName:                 tag.Name(),
				"org.opencontainers.image.ref.name": tag.TagStr(),
			},
		}},
	}
	indexJSON, err := json.Marshal(top)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": indexJSON,
	}
	for d, b := range blobs {
		files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] = b
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// collectIndex adds the raw bytes of idx's manifests, configs and layers to
// blobs by digest.
func collectIndex(idx v1.ImageIndex, blobs map[string][]byte) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	blobs[d.String()] = raw
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return fmt.Errorf("image %s: %w", desc.Digest, err)
		}
		if err := collectImage(img, blobs); err != nil {
			return err
		}
	}
	return nil
}

func collectImage(img v1.Image, blobs map[string][]byte) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	blobs[d.String()] = raw
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cd, err := img.ConfigName()
	if err != nil {
		return err
	}
	blobs[cd.String()] = cfg
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		ld, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("read layer %s: %w", ld, err)
		}
		blobs[ld.String()] = b
	}
	return nil
}

// Built is one release image written by WriteRelease.
type Built struct {
	Spec   images.Spec
	Path   string
	Digest v1.Hash
}

// WriteRelease builds every release image for every platform and writes
// each as dir/<image dir>.tar. A spec whose main package does not exist yet
// (the mock node, while it is being written) is skipped and reported.
func WriteRelease(ctx context.Context, repoRoot, dir string, specs []images.Spec, platforms []string) (built []Built, skipped []images.Spec, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", dir, err)
	}
	for _, s := range specs {
		pkg := s.Package
		if pkg == "" {
			pkg = "./images/" + s.Dir
		}
		if _, err := os.Stat(filepath.Join(repoRoot, pkg)); os.IsNotExist(err) {
			skipped = append(skipped, s)
			continue
		}
		idx, err := BuildIndex(ctx, repoRoot, s, platforms)
		if err != nil {
			return nil, nil, err
		}
		out := filepath.Join(dir, s.Dir+".tar")
		if err := WriteIndexTarball(out, s.Ref, idx); err != nil {
			return nil, nil, err
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, nil, err
		}
		built = append(built, Built{Spec: s, Path: out, Digest: d})
	}
	return built, skipped, nil
}
