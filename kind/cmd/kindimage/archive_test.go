package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// kind reads an archive's names from whichever of repositories and
// manifest.json comes first, and from manifest.json only its first image:
// repositories must come first and name every image, in full.
func TestArchiveNamesEveryImageFirstAndInFull(t *testing.T) {
	a, err := random.Image(64, 2)
	if err != nil {
		t.Fatal(err)
	}
	al, _ := a.Layers()
	b, err := mutate.AppendLayers(a) // same layers, shared blobs
	if err != nil {
		t.Fatal(err)
	}
	c, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kube-proxy.tar")
	refs := []string{"registry.k8s.io/kube-proxy:v1.37.2", "docker.io/kindest/kindnetd:v20260820-69b56db7", "registry.k8s.io/pause:3.10"}
	if err := writeArchive(path, []archiveImage{{refs[0], a}, {refs[1], b}, {refs[2], c}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
	if names[0] != "repositories" || names[1] != "manifest.json" {
		t.Fatalf("entries start %v, want repositories then manifest.json", names[:2])
	}
	var repos map[string]map[string]string
	if err := json.Unmarshal(files["repositories"], &repos); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		repo, tag, _ := strings.Cut(ref, ":")
		if _, ok := repos[repo][tag]; !ok {
			t.Errorf("repositories lacks %s: %v", ref, repos)
		}
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 3 || manifest[1].RepoTags[0] != refs[1] {
		t.Fatalf("manifest %+v", manifest)
	}
	for _, m := range manifest {
		if _, ok := files[m.Config]; !ok {
			t.Errorf("config %s missing", m.Config)
		}
		for _, l := range m.Layers {
			if _, ok := files[l]; !ok {
				t.Errorf("layer %s missing", l)
			}
		}
	}
	// a and b share layers and config: each blob once (a's layers, c's layer, two configs, two metadata files).
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
		if seen[n] > 1 {
			t.Errorf("%s written twice", n)
		}
	}
	if want := len(al) + 1 + 2 + 2; len(names) != want {
		t.Errorf("%d entries, want %d: %v", len(names), want, names)
	}
}
