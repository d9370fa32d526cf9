// Package release publishes a release of sidecar-terminator to an OCI
// registry, the same steps wherever it runs (the release workflow on GitHub,
// `make release-check` against a registry on 127.0.0.1):
//
//  1. the shipped images (controller, quick-exit), built for every platform
//     in images.Platforms with no Docker engine (package images/oci,
//     reproducible), pushed as one OCI image index each with crane;
//  2. an SPDX SBOM of each platform's image, made by syft from what the
//     registry serves;
//  3. every image signed by digest (the index and each platform's manifest)
//     and its SBOMs attached to the index as signed in-toto attestations,
//     by cosign: keyless (Fulcio and Rekor, with the workflow's OIDC token)
//     or with a key (a key made for the run; nothing leaves the machine);
//  4. the Helm chart, its version and appVersion set to the release's, its
//     controller, quick-exit and test images pinned to the repositories and
//     digests just pushed, packaged and pushed as an OCI artifact.
//
// With Sign == None (`make push`: a build from source into one's own
// registry) steps 2 and 3 are skipped and no key is needed.
//
// Verify checks a published release from the registry alone.
package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

// Shipped are the images a release pushes, the controller first: the
// controller, the quick-exit image, the workload image the chart's `helm
// test` Job runs, and the kubectl plugin (an image whose only file is the
// binary). The mock node is a test double for the kind suites and is never
// released.
var Shipped = []images.Spec{images.Controller, images.QuickExit, images.Workload, images.KubectlPlugin}

// Signing modes.
const (
	// Keyless: cosign trades the ambient OIDC token (GitHub Actions') for a
	// short-lived Fulcio certificate and records the signature in Rekor.
	Keyless = "keyless"
	// Key: a cosign key pair (made when Options.Key does not exist yet);
	// no transparency log, nothing sent anywhere but the registry.
	Key = "key"
	// None: no SBOMs, no signatures (`make push`).
	None = "none"
)

// Options of a release.
type Options struct {
	// Registry is the host[:port], with an optional path, the images go
	// to; each keeps the path of its reference in package images
	// (REGISTRY/sidecar-terminator/controller), which is the chart's
	// default repository's path.
	Registry string
	// ChartRepo is the OCI repository the chart goes to, without oci://
	// (127.0.0.1:5000/charts: the chart is then
	// oci://127.0.0.1:5000/charts/sidecar-terminator).
	ChartRepo string
	// Version of the release (semver, no leading v): the images' tag, the
	// chart's version and appVersion.
	Version string
	// Sign is Keyless, Key or None.
	Sign string
	// Key is the cosign private key for Sign == Key (its public key beside
	// it, KEY.pub with the .key suffix dropped: cosign.key, cosign.pub).
	// Made with an empty password when missing.
	Key string
	// Out holds what the release writes: layouts, SBOMs, the chart, and
	// release.json.
	Out string
	// PlainHTTP: the registry speaks HTTP, not HTTPS (a registry on
	// 127.0.0.1). crane and cosign use HTTP for loopback registries by
	// themselves; helm and syft are told.
	PlainHTTP bool
	// Root is the repository root.
	Root string
	Logf func(format string, args ...any)
	// Stderr, when set, gets each successful tool's standard error.
	Stderr func(string)
}

// Image is one pushed image index.
type Image struct {
	Name       string `json:"name"`
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	// Digest of the image index.
	Digest string `json:"digest"`
	// Platforms maps linux/ARCH to the digest of that platform's manifest.
	Platforms map[string]string `json:"platforms"`
	// SBOMs maps linux/ARCH to the SBOM file attested on the index.
	SBOMs map[string]string `json:"sboms"`
}

// Ref is the image's reference by digest.
func (i Image) Ref() string { return i.Repository + "@" + i.Digest }

// Result is what a release pushed; written to Out/release.json.
type Result struct {
	Version string  `json:"version"`
	Images  []Image `json:"images"`
	// Chart is oci://CHARTREPO/sidecar-terminator; ChartDigest the digest
	// helm push reported.
	Chart       string `json:"chart"`
	ChartDigest string `json:"chartDigest"`
	// PublicKey is the cosign public key of a Key release.
	PublicKey string `json:"publicKey,omitempty"`
}

// tools are the binaries a release runs, built from hack/tools.
type tools struct{ crane, cosign, syft, helm string }

// loadTools builds crane and helm, and with signing cosign and syft.
func loadTools(ctx context.Context, signing bool) (tools, error) {
	var t tools
	want := map[string]*string{"crane": &t.crane, "helm": &t.helm}
	if signing {
		want["cosign"], want["syft"] = &t.cosign, &t.syft
	}
	for name, dst := range want {
		p, err := toolbin.Path(ctx, name)
		if err != nil {
			return t, fmt.Errorf("build %s: %w", name, err)
		}
		*dst = p
	}
	return t, nil
}

// repositoryPath is the path of ref without its registry host and tag:
// ghcr.io/sidecar-terminator/controller:dev → sidecar-terminator/controller.
func repositoryPath(ref string) string {
	_, path, _ := strings.Cut(ref, "/")
	if i := strings.LastIndex(path, ":"); i >= 0 {
		path = path[:i]
	}
	return path
}

var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func (o *Options) check() error {
	switch {
	case o.Registry == "" || strings.Contains(o.Registry, "://") || strings.HasSuffix(o.Registry, "/") || strings.HasPrefix(o.Registry, "/"):
		return fmt.Errorf("registry %q: want host[:port][/path], without a scheme", o.Registry)
	case o.ChartRepo == "" || strings.Contains(o.ChartRepo, "://"):
		return fmt.Errorf("chart repository %q: want host[:port]/path, without oci://", o.ChartRepo)
	case !semver.MatchString(o.Version):
		return fmt.Errorf("version %q: want semver without a leading v", o.Version)
	case o.Sign != Keyless && o.Sign != Key && o.Sign != None:
		return fmt.Errorf("signing mode %q: want %s, %s or %s", o.Sign, Keyless, Key, None)
	case o.Sign == Key && o.Key == "":
		return errors.New("signing with a key needs the key's path")
	case o.Out == "" || o.Root == "":
		return errors.New("out and root must be set")
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// PublicKeyPath is the public half of a cosign private key's path.
func PublicKeyPath(key string) string { return strings.TrimSuffix(key, ".key") + ".pub" }

// Publish runs the release: images, SBOMs, signatures, attestations, chart.
func Publish(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	t, err := loadTools(ctx, o.Sign != None)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	// The chart's default image must be where the release puts the
	// controller, or the chart's default would name an image never pushed.
	def, err := deploy.DefaultControllerImage(ctx, t.helm, o.Root)
	if err != nil {
		return nil, err
	}
	if got, want := repositoryPath(def), repositoryPath(images.Controller.Ref); got != want {
		return nil, fmt.Errorf("the chart's default image %s has path %s, the release pushes the controller to %s", def, got, want)
	}
	res := &Result{Version: o.Version}
	if o.Sign == Key {
		if res.PublicKey, err = ensureKey(ctx, t, o); err != nil {
			return nil, err
		}
	}
	for _, spec := range Shipped {
		img, err := pushImage(ctx, t, o, spec)
		if err != nil {
			return nil, err
		}
		res.Images = append(res.Images, img)
	}
	for i := range res.Images {
		if o.Sign == None {
			break
		}
		if err := sbomSignAttest(ctx, t, o, &res.Images[i]); err != nil {
			return nil, err
		}
	}
	if res.Chart, res.ChartDigest, err = pushChart(ctx, t, o, res.Images); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	return res, os.WriteFile(filepath.Join(o.Out, "release.json"), append(data, '\n'), 0o644)
}

// Refs are the pushed references, one a line: each image by tag and
// digest, then the chart (as `helm install` names it, with its version)
// and its digest.
func Refs(r *Result) string {
	var b strings.Builder
	for _, img := range r.Images {
		fmt.Fprintf(&b, "%-27s %s:%s@%s\n", img.Name, img.Repository, img.Tag, img.Digest)
	}
	fmt.Fprintf(&b, "%-27s %s --version %s (%s)\n", "chart", r.Chart, r.Version, r.ChartDigest)
	return b.String()
}

// ImageNamed returns the pushed image built from spec.
func (r *Result) ImageNamed(spec images.Spec) (Image, bool) { return imageNamed(r.Images, spec) }

// ensureKey makes a cosign key pair at o.Key when it is missing and returns
// the public key's path.
func ensureKey(ctx context.Context, t tools, o Options) (string, error) {
	pub := PublicKeyPath(o.Key)
	if _, err := os.Stat(o.Key); err == nil {
		return pub, nil
	}
	dir := filepath.Dir(o.Key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	prefix := strings.TrimSuffix(filepath.Base(o.Key), ".key")
	if _, err := run(ctx, o, dir, cosignEnv(o), t.cosign, "generate-key-pair", "--output-key-prefix", prefix); err != nil {
		return "", err
	}
	o.Logf("cosign key pair made for this release: %s, %s", o.Key, pub)
	return pub, nil
}

// pushImage builds spec for every platform, writes it as an OCI layout and
// pushes it with crane under the release's tag; it returns the digests.
func pushImage(ctx context.Context, t tools, o Options, spec images.Spec) (Image, error) {
	img := Image{Name: spec.Dir, Repository: o.Registry + "/" + repositoryPath(spec.Ref), Tag: o.Version,
		Platforms: map[string]string{}, SBOMs: map[string]string{}}
	idx, err := oci.BuildIndex(ctx, o.Root, spec, images.Platforms)
	if err != nil {
		return img, err
	}
	d, err := idx.Digest()
	if err != nil {
		return img, err
	}
	img.Digest = d.String()
	im, err := idx.IndexManifest()
	if err != nil {
		return img, err
	}
	for _, m := range im.Manifests {
		img.Platforms[m.Platform.OS+"/"+m.Platform.Architecture] = m.Digest.String()
	}
	dir := filepath.Join(o.Out, "layouts", spec.Dir)
	if err := os.RemoveAll(dir); err != nil {
		return img, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return img, err
	}
	if err := p.AppendIndex(idx); err != nil {
		return img, err
	}
	tagged := img.Repository + ":" + img.Tag
	if _, err := run(ctx, o, "", nil, t.crane, "push", dir, tagged); err != nil {
		return img, err
	}
	// What the registry now serves under the tag must be what was built:
	// signatures and attestations go to this digest, never to the tag.
	out, err := run(ctx, o, "", nil, t.crane, "digest", tagged)
	if err != nil {
		return img, err
	}
	if got := strings.TrimSpace(out); got != img.Digest {
		return img, fmt.Errorf("%s: the registry serves %s, built %s", tagged, got, img.Digest)
	}
	o.Logf("pushed %s %s (%s)", tagged, img.Digest, platformsLine(img.Platforms))
	return img, nil
}

func platformsLine(m map[string]string) string {
	var parts []string
	for _, arch := range images.Platforms {
		parts = append(parts, "linux/"+arch+" "+m["linux/"+arch])
	}
	return strings.Join(parts, ", ")
}

// sbomSignAttest makes each platform's SBOM from the registry, signs the
// index and its platform manifests, and attests the SBOMs on the index.
func sbomSignAttest(ctx context.Context, t tools, o Options, img *Image) error {
	for _, arch := range images.Platforms {
		platform := "linux/" + arch
		file := filepath.Join(o.Out, "sbom", fmt.Sprintf("%s-%s.spdx.json", img.Name, arch))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		env := []string{"SYFT_CHECK_FOR_APP_UPDATE=false"}
		if o.PlainHTTP {
			env = append(env, "SYFT_REGISTRY_INSECURE_USE_HTTP=true")
		}
		if _, err := run(ctx, o, "", env, t.syft, "scan", "-q", "--platform", platform,
			"registry:"+img.Repository+"@"+img.Platforms[platform], "-o", "spdx-json="+file); err != nil {
			return err
		}
		img.SBOMs[platform] = file
	}
	sign := []string{"sign", "--yes", "--recursive"}
	sign = append(append(sign, signFlags(o)...), img.Ref())
	if _, err := run(ctx, o, "", cosignEnv(o), t.cosign, sign...); err != nil {
		return err
	}
	for _, arch := range images.Platforms {
		attest := []string{"attest", "--yes", "--type", "spdxjson", "--predicate", img.SBOMs["linux/"+arch]}
		attest = append(append(attest, signFlags(o)...), img.Ref())
		if _, err := run(ctx, o, "", cosignEnv(o), t.cosign, attest...); err != nil {
			return err
		}
	}
	o.Logf("signed %s and its platforms; SBOMs attested (%d)", img.Ref(), len(images.Platforms))
	return nil
}

// signFlags are cosign's flags for the signing mode. With a key, cosign is
// told to use no signing config from Sigstore's TUF repository and no
// transparency log, so it sends nothing anywhere but the registry.
func signFlags(o Options) []string {
	if o.Sign == Keyless {
		return nil
	}
	return []string{"--key", o.Key, "--use-signing-config=false", "--tlog-upload=false"}
}

// cosignEnv: the run's key has an empty password; TUF_ROOT keeps cosign's
// cache in the release's directory rather than the home directory.
func cosignEnv(o Options) []string {
	if o.Sign == Keyless {
		return nil
	}
	return []string{"COSIGN_PASSWORD=", "TUF_ROOT=" + filepath.Join(o.Out, "tuf")}
}

// run runs a tool and returns its standard output; the command line is
// logged, its standard error is in the error or, on success, handed to
// o.Stderr.
func run(ctx context.Context, o Options, dir string, env []string, bin string, args ...string) (string, error) {
	o.Logf("$ %s %s", filepath.Base(bin), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if o.Stderr != nil {
		o.Stderr(stderr.String())
	}
	return stdout.String(), nil
}
