package oci

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// dockerfile is what the final stage of a Dockerfile says about the image.
type dockerfile struct {
	from       string
	files      []string
	user       string
	entrypoint []string
	env        []string
}

// parseDockerfile reads the instructions this project's Dockerfiles use;
// anything else in the final stage is an error, so the test cannot pass by
// ignoring an instruction that changes the image.
func parseDockerfile(path string) (dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return dockerfile{}, err
	}
	defer f.Close()
	var d dockerfile
	final := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			// The final stage is the one the image is: scratch, or the
			// distroless base the OCI build stands in for.
			base, _, _ := strings.Cut(rest, " ")
			final = base == "scratch" || strings.HasPrefix(base, "gcr.io/distroless/")
			d = dockerfile{from: base}
		case "COPY":
			if !final {
				continue
			}
			args := strings.Fields(rest)
			if len(args) != 3 || !strings.HasPrefix(args[0], "--from=") {
				return d, errors.New("unexpected COPY form: " + line)
			}
			d.files = append(d.files, args[2])
		case "USER":
			d.user = rest
		case "ENV":
			d.env = append(d.env, rest)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &d.entrypoint); err != nil {
				return d, errors.New("ENTRYPOINT must be exec form: " + line)
			}
		default:
			if final {
				return d, errors.New("unhandled instruction in final stage: " + line)
			}
		}
	}
	return d, sc.Err()
}

// pinned: an image reference with a sha256 digest; a tag alone can move.
var pinned = regexp.MustCompile(`^[^@ ]+@sha256:[0-9a-f]{64}$`)

// Every stage's base is pinned by digest (scratch has none), so a Docker
// build of a release commit gets the same bases later.
func TestDockerfileBasesArePinnedByDigest(t *testing.T) {
	files := allDockerfiles(t)
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") || fields[1] == "scratch" {
				continue
			}
			if !pinned.MatchString(fields[1]) {
				t.Errorf("%s: base %q is not pinned by digest", filepath.Base(filepath.Dir(path)), fields[1])
			}
		}
	}
}

func TestDockerfilesAgreeWithOCIBuild(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range images.All {
		t.Run(spec.Dir, func(t *testing.T) {
			df, err := parseDockerfile(filepath.Join(root, "images", spec.Dir, "Dockerfile"))
			if err != nil {
				t.Fatalf("parse Dockerfile: %v", err)
			}
			img, err := Build(context.Background(), root, spec)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cf.Config.Entrypoint, df.entrypoint) {
				t.Errorf("entrypoint: OCI %q, Dockerfile %q", cf.Config.Entrypoint, df.entrypoint)
			}
			if cf.Config.User != df.user {
				t.Errorf("user: OCI %q, Dockerfile %q", cf.Config.User, df.user)
			}
			if !reflect.DeepEqual(nilIfEmpty(cf.Config.Env), nilIfEmpty(df.env)) {
				t.Errorf("env: OCI %q, Dockerfile %q", cf.Config.Env, df.env)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers: %d, %v; want exactly one", len(layers), err)
			}
			got := layerFiles(t, layers[0])
			want := sorted(df.files)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("files: OCI %q\nDockerfile %q", got, want)
			}
		})
	}
}

// layerFiles lists regular files and hard links (each a path of the binary).
func layerFiles(t *testing.T, l interface{ Uncompressed() (io.ReadCloser, error) }) []string {
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeLink {
			files = append(files, "/"+h.Name)
		}
	}
	return sorted(files)
}

func TestQuickExitREADMEListsEveryPath(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "images", "quick-exit", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(/[^`]+)` \\|$").FindAllStringSubmatch(string(data), -1) {
		listed = append(listed, m[1])
	}
	if want := sorted(images.QuickExitPaths); !reflect.DeepEqual(sorted(listed), want) {
		t.Errorf("README lists %q\nimages.QuickExitPaths %q", sorted(listed), want)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Each Dockerfile builds its binary as the OCI build does, and as the
// controller is built for the suites and the bench (images.BuildEnv and
// images.BuildFlags): what they run and measure is what a Docker build
// ships.
func TestDockerfilesBuildAsTheOCIBuild(t *testing.T) {
	files := allDockerfiles(t)
	var flags []string
	for _, f := range images.BuildFlags {
		if strings.ContainsAny(f, " \t") {
			f = `"` + f + `"`
		}
		flags = append(flags, f)
	}
	wantBuild := "go build " + strings.Join(flags, " ") + " "
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(filepath.Dir(path))
		builds := 0
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "RUN ") || !strings.Contains(line, "go build") {
				continue
			}
			builds++
			env, _, _ := strings.Cut(strings.TrimPrefix(line, "RUN "), "go build")
			for _, e := range images.BuildEnv {
				if !slices.Contains(strings.Fields(env), e) {
					t.Errorf("%s: the build does not set %s: %s", name, e, line)
				}
			}
			if !strings.Contains(line, wantBuild) {
				t.Errorf("%s: the build's flags are not %q: %s", name, wantBuild, line)
			}
		}
		if builds == 0 {
			t.Errorf("%s: no go build in the Dockerfile", name)
		}
	}
}

// allDockerfiles are the paths of images/*/Dockerfile.
func allDockerfiles(t *testing.T) []string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "images", "*", "Dockerfile"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Dockerfiles under images/: %v", err)
	}
	return files
}
