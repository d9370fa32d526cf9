package release

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// Report is what Verify saw, for the log: cosign's own words and the SBOM
// comparison.
type Report struct {
	// Lines are cosign verify's and verify-attestation's summary lines, one
	// per reference checked, and the SBOM findings.
	Lines []string
}

// Verify checks a published release from the registry alone, with the
// public key of a Key release: every tag serves the digest published,
// `cosign verify` accepts the index and each platform's manifest,
// `cosign verify-attestation` accepts an SPDX SBOM per platform on the
// index, each SBOM names every module of go.mod linked into the image's
// binary at its go.mod version (and no module outside go.mod), and the
// chart at its version pins the controller's digest.
func Verify(ctx context.Context, o Options, pub string, want *Result) (*Report, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	t, err := loadTools(ctx, true)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	var stderr string
	o.Stderr = func(s string) { stderr = s }
	verifyFlags := []string{"--key", pub, "--insecure-ignore-tlog=true"}
	env := []string{"TUF_ROOT=" + o.Out + "/tuf"}
	for _, img := range want.Images {
		tagged := img.Repository + ":" + img.Tag
		got, err := run(ctx, o, "", nil, t.crane, "digest", tagged)
		if err != nil {
			return rep, err
		}
		if strings.TrimSpace(got) != img.Digest {
			return rep, fmt.Errorf("%s serves %s, the release pushed %s", tagged, strings.TrimSpace(got), img.Digest)
		}
		refs := []string{img.Ref()}
		for _, arch := range images.Platforms {
			refs = append(refs, img.Repository+"@"+img.Platforms["linux/"+arch])
		}
		for _, ref := range refs {
			out, err := run(ctx, o, "", env, t.cosign, append(append([]string{"verify"}, verifyFlags...), ref)...)
			if err != nil {
				return rep, err
			}
			if n := countJSONLines(out); n == 0 {
				return rep, fmt.Errorf("cosign verify %s: no signature printed", ref)
			}
			rep.Lines = append(rep.Lines, "cosign verify: "+cosignSummary(stderr))
		}
		out, err := run(ctx, o, "", env, t.cosign, append(append([]string{"verify-attestation", "--type", "spdxjson"}, verifyFlags...), img.Ref())...)
		if err != nil {
			return rep, err
		}
		rep.Lines = append(rep.Lines, "cosign verify-attestation: "+cosignSummary(stderr))
		sboms, err := decodeAttestations(out, img.Digest)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", img.Ref(), err)
		}
		if len(sboms) != len(images.Platforms) {
			return rep, fmt.Errorf("%s: %d SPDX attestations, want one per platform (%d)", img.Ref(), len(sboms), len(images.Platforms))
		}
		spec := specNamed(img.Name)
		for _, arch := range images.Platforms {
			sbom, ok := sboms[img.Platforms["linux/"+arch]]
			if !ok {
				return rep, fmt.Errorf("%s: no SBOM made from its linux/%s image (%s)", img.Ref(), arch, img.Platforms["linux/"+arch])
			}
			line, err := checkModules(ctx, o.Root, spec, arch, sbom)
			if err != nil {
				return rep, fmt.Errorf("%s linux/%s: %w", img.Ref(), arch, err)
			}
			rep.Lines = append(rep.Lines, fmt.Sprintf("SBOM %s linux/%s: %s", img.Name, arch, line))
		}
	}
	line, err := checkChart(ctx, o, t, want)
	if err != nil {
		return rep, err
	}
	rep.Lines = append(rep.Lines, line)
	return rep, nil
}

func specNamed(name string) images.Spec {
	for _, s := range Shipped {
		if s.Dir == name {
			return s
		}
	}
	return images.Spec{Dir: name}
}

// cosignSummary is cosign's report of a verification (its standard error):
// the "Verification for REF --" line and the checks it lists.
func cosignSummary(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Verification for ") || strings.HasPrefix(l, "- ") {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

func countJSONLines(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "[") || strings.HasPrefix(strings.TrimSpace(l), "{") {
			n++
		}
	}
	return n
}

// spdxDoc is the part of an SPDX 2.x JSON document read here.
type spdxDoc struct {
	SPDXVersion string `json:"spdxVersion"`
	Name        string `json:"name"`
	Packages    []struct {
		Name         string `json:"name"`
		VersionInfo  string `json:"versionInfo"`
		ExternalRefs []struct {
			Type    string `json:"referenceType"`
			Locator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
}

// scannedDigest is the manifest digest of the image syft scanned: the
// version of the SBOM's package for the image itself (syft's source
// description, stereoscopesource.Describe: the digest of a reference by
// digest), or the document's name when it carries one (REPO@DIGEST).
func (d spdxDoc) scannedDigest() string {
	for _, p := range d.Packages {
		if strings.HasPrefix(p.VersionInfo, "sha256:") {
			return p.VersionInfo
		}
	}
	if _, dg, ok := strings.Cut(d.Name, "@"); ok {
		return dg
	}
	return ""
}

// goModules are the SBOM's Go modules (purl pkg:golang/PATH@VERSION),
// path → version.
func (d spdxDoc) goModules() map[string]string {
	mods := map[string]string{}
	for _, p := range d.Packages {
		for _, r := range p.ExternalRefs {
			if r.Type != "purl" || !strings.HasPrefix(r.Locator, "pkg:golang/") {
				continue
			}
			purl := strings.TrimPrefix(r.Locator, "pkg:golang/")
			purl, _, _ = strings.Cut(purl, "?")
			path, version, _ := strings.Cut(purl, "@")
			if path == "" {
				continue
			}
			mods[unescapePurl(path)] = unescapePurl(version)
		}
	}
	return mods
}

func unescapePurl(s string) string {
	r := strings.NewReplacer("%2F", "/", "%2f", "/", "%40", "@", "%2B", "+", "%2b", "+")
	return r.Replace(s)
}

// decodeAttestations reads `cosign verify-attestation` output (one DSSE
// envelope of an in-toto statement per line), checks each statement's
// subject is the index digest, and returns the SPDX documents keyed by the
// platform manifest they were made from.
func decodeAttestations(out, indexDigest string) (map[string]spdxDoc, error) {
	docs := map[string]spdxDoc{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var env struct {
			PayloadType string `json:"payloadType"`
			Payload     string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			return nil, fmt.Errorf("attestation envelope: %w", err)
		}
		// A DSSE envelope (its payload base64), or the statement itself.
		payload := []byte(line)
		if env.Payload != "" {
			var err error
			if payload, err = base64.StdEncoding.DecodeString(env.Payload); err != nil {
				return nil, fmt.Errorf("attestation payload: %w", err)
			}
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
			Predicate spdxDoc `json:"predicate"`
		}
		if err := json.Unmarshal(payload, &st); err != nil {
			return nil, fmt.Errorf("in-toto statement: %w", err)
		}
		if !strings.HasPrefix(st.PredicateType, "https://spdx.dev/Document") {
			return nil, fmt.Errorf("predicate type %q, want SPDX", st.PredicateType)
		}
		if len(st.Subject) != 1 || "sha256:"+st.Subject[0].Digest["sha256"] != indexDigest {
			return nil, fmt.Errorf("attestation subject %v, want %s", st.Subject, indexDigest)
		}
		if !strings.HasPrefix(st.Predicate.SPDXVersion, "SPDX-2.") {
			return nil, fmt.Errorf("SBOM version %q, want SPDX-2.x", st.Predicate.SPDXVersion)
		}
		docs[st.Predicate.scannedDigest()] = st.Predicate
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, errors.New("no attestation printed")
	}
	return docs, nil
}

// checkModules compares the SBOM's Go modules with what the Go toolchain
// says the image's binary links (go list -deps for its platform) and with
// go.mod: every linked module is named at its version, and every module the
// SBOM names is go.mod's at the same version.
func checkModules(ctx context.Context, root string, spec images.Spec, arch string, sbom spdxDoc) (string, error) {
	pkg := spec.Package
	if pkg == "" {
		pkg = "./images/" + spec.Dir
	}
	linked, err := goLines(ctx, root, []string{"GOOS=linux", "GOARCH=" + arch, "CGO_ENABLED=0"},
		"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", pkg)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "edit", "-json")
	cmd.Dir = root
	modJSON, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod edit -json: %w", err)
	}
	var gomod struct {
		Module  struct{ Path string }
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(modJSON, &gomod); err != nil {
		return "", err
	}
	required := map[string]string{}
	for _, r := range gomod.Require {
		required[r.Path] = r.Version
	}
	have := sbom.goModules()
	var missing, outside []string
	want := map[string]string{}
	for _, l := range linked {
		path, version, _ := strings.Cut(l, " ")
		want[path] = version
	}
	for path, version := range want {
		if have[path] != version {
			missing = append(missing, fmt.Sprintf("%s %s (SBOM: %q)", path, version, have[path]))
		}
	}
	for path, version := range have {
		if path == gomod.Module.Path || path == "stdlib" {
			continue
		}
		if required[path] != version {
			outside = append(outside, path+" "+version)
		}
	}
	sort.Strings(missing)
	sort.Strings(outside)
	if len(missing) > 0 || len(outside) > 0 {
		return "", fmt.Errorf("SBOM lacks linked modules %v; names modules not in go.mod at that version %v", missing, outside)
	}
	if _, ok := have[gomod.Module.Path]; !ok {
		return "", fmt.Errorf("SBOM does not name the main module %s", gomod.Module.Path)
	}
	deps := len(have) - 1 // the main module
	if _, ok := have["stdlib"]; ok {
		deps--
	}
	return fmt.Sprintf("%d dependency modules besides %s and stdlib, each in go.mod at the SBOM's version; all %d modules the binary links are named",
		deps, gomod.Module.Path, len(want)), nil
}

func goLines(ctx context.Context, dir string, env []string, args ...string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return nil, err
	}
	var lines []string
	seen := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" && !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// checkChart reads the pushed chart back from the registry: its version and
// appVersion, and the controller digest its values pin.
func checkChart(ctx context.Context, o Options, t tools, want *Result) (string, error) {
	base := []string{want.Chart, "--version", want.Version}
	if o.PlainHTTP {
		base = append(base, "--plain-http")
	}
	meta, err := run(ctx, o, "", nil, t.helm, append([]string{"show", "chart"}, base...)...)
	if err != nil {
		return "", err
	}
	for _, w := range []string{"version: " + want.Version, "appVersion: " + want.Version} {
		if !strings.Contains(meta, "\n"+w+"\n") && !strings.HasPrefix(meta, w+"\n") {
			return "", fmt.Errorf("chart %s %s: Chart.yaml lacks %q:\n%s", want.Chart, want.Version, w, meta)
		}
	}
	values, err := run(ctx, o, "", nil, t.helm, append([]string{"show", "values"}, base...)...)
	if err != nil {
		return "", err
	}
	ctl := want.Images[0]
	if !strings.Contains(values, `digest: "`+ctl.Digest+`"`) {
		return "", fmt.Errorf("chart %s %s does not pin the controller digest %s", want.Chart, want.Version, ctl.Digest)
	}
	return fmt.Sprintf("chart %s --version %s: appVersion %s, controller pinned to %s", want.Chart, want.Version, want.Version, ctl.Digest), nil
}
