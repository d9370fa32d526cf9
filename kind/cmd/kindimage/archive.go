package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// archiveImage is one image of a docker-archive tarball, under its full name.
type archiveImage struct {
	Ref   string // e.g. registry.k8s.io/kube-apiserver:v1.37.2, written in full
	Image v1.Image
}

// writeArchive writes images as one docker-archive ("docker save") tarball
// that `kind build node-image` reads: kind takes an archive's names from
// whichever of `repositories` and `manifest.json` comes first, and from
// manifest.json only its first image
// (sigs.k8s.io/kind pkg/build/nodeimage/internal/container/docker/archive.go),
// so `repositories` comes first and names every image. Names are written as
// given: kind compares them with kubeadm's full names, and `docker save`
// would shorten docker.io/... ones. Layers are written uncompressed, each
// blob once.
func writeArchive(path string, images []archiveImage) error {
	type entry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []entry
	repos := map[string]map[string]string{}
	type blob struct {
		name  string
		layer v1.Layer
		raw   []byte
	}
	var blobs []blob
	seen := map[string]bool{}
	for _, im := range images {
		repo, tag, ok := strings.Cut(im.Ref, ":")
		if !ok || strings.Contains(tag, "/") {
			return fmt.Errorf("%s: want repository:tag", im.Ref)
		}
		cfg, err := im.Image.RawConfigFile()
		if err != nil {
			return err
		}
		cfgName, err := im.Image.ConfigName()
		if err != nil {
			return err
		}
		e := entry{Config: cfgName.Hex + ".json", RepoTags: []string{im.Ref}}
		if !seen[e.Config] {
			seen[e.Config] = true
			blobs = append(blobs, blob{name: e.Config, raw: cfg})
		}
		layers, err := im.Image.Layers()
		if err != nil {
			return err
		}
		var top string
		for _, l := range layers {
			d, err := l.DiffID()
			if err != nil {
				return err
			}
			name := d.Hex + "/layer.tar"
			e.Layers = append(e.Layers, name)
			top = d.Hex
			if !seen[name] {
				seen[name] = true
				blobs = append(blobs, blob{name: name, layer: l})
			}
		}
		manifest = append(manifest, e)
		if repos[repo] == nil {
			repos[repo] = map[string]string{}
		}
		repos[repo][tag] = top
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	writeBytes := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	rb, _ := json.Marshal(repos)
	mb, _ := json.Marshal(manifest)
	if err := writeBytes("repositories", rb); err != nil {
		return err
	}
	if err := writeBytes("manifest.json", mb); err != nil {
		return err
	}
	for _, b := range blobs {
		if b.raw != nil {
			if err := writeBytes(b.name, b.raw); err != nil {
				return err
			}
			continue
		}
		size, err := uncompressedSize(b.layer)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: b.name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		rc, err := b.layer.Uncompressed()
		if err != nil {
			return err
		}
		n, err := io.Copy(tw, rc)
		rc.Close()
		if err != nil {
			return err
		}
		if n != size {
			return fmt.Errorf("layer %s: %d bytes, expected %d", b.name, n, size)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// uncompressedSize counts a layer's uncompressed bytes (tar headers need it first).
func uncompressedSize(l v1.Layer) (int64, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}

type ioReadCloser = io.ReadCloser

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }
