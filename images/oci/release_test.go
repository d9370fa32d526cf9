package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// releaseSpecs are the release images whose sources exist: the mock node's
// package may still be on its way.
func releaseSpecs(t *testing.T, root string) []images.Spec {
	t.Helper()
	var out []images.Spec
	for _, s := range images.Release {
		pkg := s.Package
		if pkg == "" {
			pkg = "./images/" + s.Dir
		}
		if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
			t.Logf("%s: no package %s yet, not checked", s.Dir, pkg)
			continue
		}
		out = append(out, s)
	}
	return out
}

func TestReleaseDockerfilesAgreeWithOCIBuild(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range releaseSpecs(t, root) {
		if spec.Base == "" {
			continue // scratch images: TestDockerfilesAgreeWithOCIBuild
		}
		t.Run(spec.Dir, func(t *testing.T) {
			df, err := parseDockerfile(filepath.Join(root, "images", spec.Dir, "Dockerfile"))
			if err != nil {
				t.Fatal(err)
			}
			if df.from != spec.Base {
				t.Errorf("Dockerfile FROM %q, spec.Base %q", df.from, spec.Base)
			}
			img, err := Build(context.Background(), root, spec)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cf.Config.Entrypoint, df.entrypoint) || cf.Config.User != df.user || !reflect.DeepEqual(cf.Config.Env, df.env) {
				t.Errorf("config: OCI %q %q %q, Dockerfile %q %q %q", cf.Config.Entrypoint, cf.Config.User, cf.Config.Env, df.entrypoint, df.user, df.env)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 2 {
				t.Fatalf("layers: %d, %v; want the base and the binary", len(layers), err)
			}
			if got, want := layerFiles(t, layers[1]), sorted(df.files); !reflect.DeepEqual(got, want) {
				t.Errorf("files: OCI %q, Dockerfile %q", got, want)
			}
			// USER 65532 must be a user of the image, with a home it owns.
			base := untar(t, layers[0])
			if !strings.Contains(string(base["etc/passwd"].data), "nonroot:x:65532:65532:nonroot:/home/nonroot:") {
				t.Errorf("/etc/passwd lacks nonroot 65532:\n%s", base["etc/passwd"].data)
			}
			if h := base["home/nonroot/"].hdr; h == nil || h.Uid != 65532 {
				t.Errorf("/home/nonroot not owned by 65532: %+v", h)
			}
			if h := base["tmp/"].hdr; h == nil || h.Mode&0o1777 != 0o1777 {
				t.Errorf("/tmp not world-writable and sticky: %+v", h)
			}
		})
	}
}

// Two builds of every release image give the same index digest and the
// same tarball bytes, and each index holds one image per platform whose
// binary is built for that machine. Every image is built for this machine's
// architecture; only the smallest (quick-exit) for every release platform:
// a cross build of the controller or the mock node compiles their whole
// dependency tree again (minutes on a cold build cache, which is how CI
// meets it), and proves nothing about the image assembly that the
// quick-exit image does not. The release workflow builds them all
// (`make images`).
func TestReleaseImagesAreReproducibleAndMultiArch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every release image twice")
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, spec := range releaseSpecs(t, root) {
		platforms := []string{runtime.GOARCH}
		if spec.Dir == images.QuickExit.Dir {
			platforms = images.Platforms
		}
		t.Run(spec.Dir, func(t *testing.T) {
			specs := []images.Spec{spec}
			first, _, err := WriteRelease(ctx, root, t.TempDir(), specs, platforms)
			if err != nil {
				t.Fatal(err)
			}
			second, _, err := WriteRelease(ctx, root, t.TempDir(), specs, platforms)
			if err != nil {
				t.Fatal(err)
			}
			if len(first) != 1 || len(second) != 1 {
				t.Fatalf("built %d and %d images, want 1", len(first), len(second))
			}
			b := first[0]
			t.Logf("%s %s %v", b.Spec.Ref, b.Digest, platforms)
			if b.Digest != second[0].Digest {
				t.Errorf("digest %s then %s", b.Digest, second[0].Digest)
			}
			a, _ := os.ReadFile(b.Path)
			c, _ := os.ReadFile(second[0].Path)
			if !bytes.Equal(a, c) {
				t.Errorf("tarballs differ")
			}
			checkLayout(t, b, platforms)
		})
	}
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkLayout reads the OCI layout tarball back: index.json names the image,
// the index has one manifest per platform, and each binary is static and
// built for its platform.
func checkLayout(t *testing.T, b Built, platforms []string) {
	t.Helper()
	f, err := os.Open(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := untarReader(t, f)
	if !strings.Contains(string(files["index.json"].data), `"io.containerd.image.name":"`+b.Spec.Ref+`"`) {
		t.Errorf("%s: index.json does not name %s: %s", b.Spec.Dir, b.Spec.Ref, files["index.json"].data)
	}
	blob := func(h v1.Hash) []byte {
		e, ok := files["blobs/sha256/"+h.Hex]
		if !ok {
			t.Fatalf("%s: blob %s missing", b.Spec.Dir, h)
		}
		return e.data
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(blob(b.Digest)))
	if err != nil {
		t.Fatal(err)
	}
	var arches []string
	for _, m := range idx.Manifests {
		arches = append(arches, m.Platform.Architecture)
		man, err := v1.ParseManifest(bytes.NewReader(blob(m.Digest)))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := v1.ParseConfigFile(bytes.NewReader(blob(man.Config.Digest)))
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != m.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("%s: index says %s, config says %s/%s", b.Spec.Dir, m.Platform.Architecture, cf.OS, cf.Architecture)
		}
		last := man.Layers[len(man.Layers)-1]
		bin := fileInGzipLayer(t, blob(last.Digest), strings.TrimPrefix(b.Spec.Path, "/"))
		ef, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s/%s: binary is not ELF: %v", b.Spec.Dir, m.Platform.Architecture, err)
		}
		if ef.Machine != elfMachine[m.Platform.Architecture] {
			t.Errorf("%s/%s: binary for %s", b.Spec.Dir, m.Platform.Architecture, ef.Machine)
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s/%s: binary is dynamically linked", b.Spec.Dir, m.Platform.Architecture)
			}
		}
	}
	if !reflect.DeepEqual(arches, platforms) {
		t.Errorf("%s: platforms %v, want %v", b.Spec.Dir, arches, platforms)
	}
}

// Each release image's entrypoint, taken out of the image for this host's
// architecture, starts and behaves: the controller and the mock node answer
// --help with their flags and exit 0, and quick-exit exits 0 under an argv
// that would make a real sidecar fail.
func TestReleaseEntrypointsRun(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		args     []string
		contains string
		exitCode int
	}{
		"controller": {[]string{"--help"}, "--virtual-node-selector", 0},
		"mock-node":  {[]string{"--help"}, "-kubeconfig", 0},
		"quick-exit": {[]string{"-c", "/etc/envoy/envoy.yaml", "--bogus"}, "", 0},
	}
	for _, spec := range releaseSpecs(t, root) {
		t.Run(spec.Dir, func(t *testing.T) {
			img, err := BuildFor(context.Background(), root, spec, runtime.GOARCH)
			if err != nil {
				t.Fatal(err)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			bin := untar(t, layers[len(layers)-1])[strings.TrimPrefix(spec.Entrypoint[0], "/")].data
			path := filepath.Join(t.TempDir(), spec.Dir)
			if err := os.WriteFile(path, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			w := want[spec.Dir]
			out, err := exec.Command(path, w.args...).CombinedOutput()
			if c := exitCode(t, err); c != w.exitCode {
				t.Fatalf("%s %q exited %d, want %d\n%s", spec.Entrypoint[0], w.args, c, w.exitCode, out)
			}
			if !strings.Contains(string(out), w.contains) {
				t.Errorf("%s %q printed no %q:\n%s", spec.Entrypoint[0], w.args, w.contains, out)
			}
		})
	}
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func untar(t *testing.T, l v1.Layer) map[string]tarEntry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return untarReader(t, rc)
}

func untarReader(t *testing.T, r io.Reader) map[string]tarEntry {
	t.Helper()
	out := map[string]tarEntry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = tarEntry{hdr: h, data: data}
	}
}

func fileInGzipLayer(t *testing.T, compressed []byte, name string) []byte {
	t.Helper()
	zr, err := gzipReader(compressed)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := untarReader(t, zr)[name]
	if !ok {
		t.Fatalf("layer has no %s", name)
	}
	return e.data
}

func gzipReader(b []byte) (io.Reader, error) { return gzip.NewReader(bytes.NewReader(b)) }
