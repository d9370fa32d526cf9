package release

// The release's chart: packaged with its images pinned to the repositories
// and digests just pushed, and pushed to the registry as an OCI artifact.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// pushChart packages the chart with the release's version and its images
// pinned to what was pushed, and pushes it.
func pushChart(ctx context.Context, t tools, o Options, pushed []Image) (ref, digest string, err error) {
	src := filepath.Join(o.Out, "chart-src", deploy.ReleaseName)
	if err := os.RemoveAll(filepath.Dir(src)); err != nil {
		return "", "", err
	}
	if err := os.CopyFS(src, os.DirFS(deploy.ChartDir(o.Root))); err != nil {
		return "", "", err
	}
	if err := pinImages(filepath.Join(src, "values.yaml"), pushed); err != nil {
		return "", "", err
	}
	dst := filepath.Join(o.Out, "chart")
	if _, err := run(ctx, o, "", nil, t.helm, "package", src, "--version", o.Version, "--app-version", o.Version, "--destination", dst); err != nil {
		return "", "", err
	}
	tgz := filepath.Join(dst, fmt.Sprintf("%s-%s.tgz", deploy.ReleaseName, o.Version))
	args := []string{"push", tgz, "oci://" + o.ChartRepo}
	if o.PlainHTTP {
		args = append(args, "--plain-http")
	}
	var pushErr string
	o.Stderr = func(s string) { pushErr = s }
	out, err := run(ctx, o, "", nil, t.helm, args...)
	if err != nil {
		return "", "", err
	}
	out += pushErr
	m := regexp.MustCompile(`Digest: (sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	if m == nil {
		return "", "", fmt.Errorf("helm push printed no digest: %s", out)
	}
	ref = "oci://" + o.ChartRepo + "/" + deploy.ReleaseName
	o.Logf("pushed chart %s --version %s %s", ref, o.Version, m[1])
	return ref, m[1], nil
}

// defaultRepository is the repository the chart's values.yaml names for an
// image: its reference without the tag.
func defaultRepository(spec images.Spec) string {
	ref := spec.Ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// pinImages rewrites the chart's values.yaml so that the released chart
// runs what was pushed: each image block (image:, tests.image:,
// tests.quickExitImage:) whose repository is the project's default for a
// pushed image gets the pushed repository and digest, and the quick-exit
// allowlist's default entry becomes the pushed quick-exit repository, so
// that the pushed image may be swapped in. Nothing else changes; an image
// override (image.registry) keeps the digest.
func pinImages(values string, pushed []Image) error {
	data, err := os.ReadFile(values)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	for _, spec := range []images.Spec{images.Controller, images.Workload, images.QuickExit} {
		img, ok := imageNamed(pushed, spec)
		if !ok {
			return fmt.Errorf("%s was not pushed", spec.Dir)
		}
		if lines, err = pinBlock(lines, defaultRepository(spec), img); err != nil {
			return fmt.Errorf("%s: %w", values, err)
		}
	}
	qe, _ := imageNamed(pushed, images.QuickExit)
	item := "  - " + defaultRepository(images.QuickExit)
	n := 0
	for i, l := range lines {
		if l == item {
			lines[i] = "  - " + qe.Repository
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%s: %d quick-exit allowlist entries %q, want 1", values, n, strings.TrimSpace(item))
	}
	return os.WriteFile(values, []byte(strings.Join(lines, "\n")), 0o644)
}

// pinBlock sets, in the one values.yaml block whose `repository:` is repo,
// the repository to img's and its empty `digest: ""` to img's digest.
func pinBlock(lines []string, repo string, img Image) ([]string, error) {
	at := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "repository: "+repo {
			if at >= 0 {
				return nil, fmt.Errorf("two blocks with repository %s", repo)
			}
			at = i
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("no block with repository %s", repo)
	}
	indent := lines[at][:len(lines[at])-len(strings.TrimLeft(lines[at], " "))]
	lines[at] = indent + "repository: " + img.Repository
	for i := at + 1; i < len(lines) && strings.HasPrefix(lines[i], indent); i++ {
		rest := strings.TrimPrefix(lines[i], indent)
		if strings.HasPrefix(rest, " ") {
			continue // a comment's continuation or a deeper key
		}
		if rest == `digest: ""` {
			lines[i] = indent + `digest: "` + img.Digest + `"`
			return lines, nil
		}
	}
	return nil, fmt.Errorf("the block with repository %s has no empty digest", repo)
}

func imageNamed(pushed []Image, spec images.Spec) (Image, bool) {
	for _, img := range pushed {
		if img.Name == spec.Dir {
			return img, true
		}
	}
	return Image{}, false
}
