package release

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

func TestRepositoryPathDropsHostAndTag(t *testing.T) {
	for ref, want := range map[string]string{
		images.Controller.Ref:                   "sidecar-terminator/controller",
		"127.0.0.1:5000/a/b:1.2.3":              "a/b",
		"ghcr.io/sidecar-terminator/quick-exit": "sidecar-terminator/quick-exit",
	} {
		if got := repositoryPath(ref); got != want {
			t.Errorf("repositoryPath(%q) = %q, want %q", ref, got, want)
		}
	}
}

// The pushed chart's values run what was pushed: the controller, the
// `helm test` images and the quick-exit allowlist's default entry name the
// pushed repositories (a registry with a path, as `make push` allows) and
// digests; the rest of values.yaml is untouched.
func TestPinImagesPointsTheChartAtThePushedImages(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(deploy.ChartDir(root), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	const reg = "registry.example.com/team"
	digest := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	pushed := []Image{
		{Name: images.Controller.Dir, Repository: reg + "/sidecar-terminator/controller", Digest: digest("a")},
		{Name: images.QuickExit.Dir, Repository: reg + "/sidecar-terminator/quick-exit", Digest: digest("b")},
		{Name: images.Workload.Dir, Repository: reg + "/sidecar-terminator/workload", Digest: digest("c")},
	}
	if err := pinImages(p, pushed); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	var values struct {
		Image struct{ Repository, Digest string }
		Allow []string `json:"quickExitImageAllowlist"`
		Tests struct {
			Image          struct{ Repository, Digest string }
			QuickExitImage struct{ Repository, Digest string } `json:"quickExitImage"`
		}
	}
	if err := yaml.Unmarshal(got, &values); err != nil {
		t.Fatal(err)
	}
	for what, pair := range map[string][2]string{
		"image":                      {values.Image.Repository + "@" + values.Image.Digest, pushed[0].Ref()},
		"tests.image":                {values.Tests.Image.Repository + "@" + values.Tests.Image.Digest, pushed[2].Ref()},
		"tests.quickExitImage":       {values.Tests.QuickExitImage.Repository + "@" + values.Tests.QuickExitImage.Digest, pushed[1].Ref()},
		"quickExitImageAllowlist[0]": {strings.Join(values.Allow, ","), pushed[1].Repository},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s = %s, want %s", what, pair[0], pair[1])
		}
	}
	// Only those lines changed.
	a, b := strings.Split(string(orig), "\n"), strings.Split(string(got), "\n")
	if len(a) != len(b) {
		t.Fatalf("pinning changed the number of lines: %d to %d", len(a), len(b))
	}
	changed := 0
	for i := range a {
		if a[i] != b[i] {
			changed++
			if !strings.Contains(b[i], reg) && !strings.Contains(b[i], "sha256:") {
				t.Errorf("line %d changed beyond the images: %q to %q", i+1, a[i], b[i])
			}
		}
	}
	if changed != 7 {
		t.Errorf("%d lines changed, want 7 (3 repositories, 3 digests, 1 allowlist entry)", changed)
	}
	if err := pinImages(p, pushed); err == nil {
		t.Error("a second pin found the project's default repositories again")
	}
}

func envelope(t *testing.T, subject, scanned string, purls ...string) string {
	t.Helper()
	type ref struct {
		Type    string `json:"referenceType"`
		Locator string `json:"referenceLocator"`
	}
	var pkgs []map[string]any
	for _, p := range purls {
		pkgs = append(pkgs, map[string]any{"name": p, "externalRefs": []ref{{"purl", p}}})
	}
	st := map[string]any{
		"_type": "https://in-toto.io/Statement/v0.1", "predicateType": "https://spdx.dev/Document",
		"subject":   []any{map[string]any{"name": "r", "digest": map[string]string{"sha256": strings.TrimPrefix(subject, "sha256:")}}},
		"predicate": map[string]any{"spdxVersion": "SPDX-2.3", "name": "127.0.0.1:5000/x@" + scanned, "packages": pkgs},
	}
	payload, _ := json.Marshal(st)
	env, _ := json.Marshal(map[string]any{"payloadType": "application/vnd.in-toto+json", "payload": base64.StdEncoding.EncodeToString(payload)})
	return string(env)
}

func TestAttestationsAreReadPerScannedPlatform(t *testing.T) {
	const idx, amd, arm = "sha256:1111", "sha256:2222", "sha256:3333"
	out := envelope(t, idx, amd, "pkg:golang/k8s.io/client-go@v0.37.2") + "\n" +
		envelope(t, idx, arm, "pkg:golang/github.com/a%2Fb@v1.0.0", "pkg:golang/stdlib@go1.26.8") + "\n"
	docs, err := decodeAttestations(out, idx)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[amd].goModules()["k8s.io/client-go"] != "v0.37.2" || docs[arm].goModules()["github.com/a/b"] != "v1.0.0" {
		t.Errorf("decoded %+v", docs)
	}
	if _, err := decodeAttestations(out, "sha256:9999"); err == nil {
		t.Error("attestations about another subject accepted")
	}
}

// The SBOM check fails when a module the binary links is missing or at
// another version, and when the SBOM names a module go.mod does not.
func TestCheckModulesCatchesMissingAndForeignModules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the controller")
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	linked, err := goLines(t.Context(), root, []string{"GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0"},
		"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}", images.Controller.Package)
	if err != nil {
		t.Fatal(err)
	}
	build := func(mods []string) spdxDoc {
		purls := []string{"pkg:golang/github.com/sidecar-terminator/sidecar-terminator@(devel)"}
		for _, m := range mods {
			purls = append(purls, "pkg:golang/"+m)
		}
		docs, err := decodeAttestations(envelope(t, "sha256:1", "sha256:2", purls...), "sha256:1")
		if err != nil {
			t.Fatal(err)
		}
		return docs["sha256:2"]
	}
	if _, err := checkModules(t.Context(), root, images.Controller, "amd64", build(linked)); err != nil {
		t.Fatalf("the linked modules themselves: %v", err)
	}
	if _, err := checkModules(t.Context(), root, images.Controller, "amd64", build(linked[1:])); err == nil {
		t.Errorf("an SBOM without %s passed", linked[0])
	}
	if _, err := checkModules(t.Context(), root, images.Controller, "amd64", build(append(linked, "example.com/not-in-go-mod@v1.0.0"))); err == nil {
		t.Error("an SBOM naming a module outside go.mod passed")
	}
}
