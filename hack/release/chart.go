package release

// The release's chart: packaged with the controller pinned to the digest
// pushed, and pushed to the registry as an OCI artifact.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
)

// pushChart packages the chart with the release's version and the
// controller pinned to the digest pushed, and pushes it.
func pushChart(ctx context.Context, t tools, o Options, controller Image) (ref, digest string, err error) {
	src := filepath.Join(o.Out, "chart-src", deploy.ReleaseName)
	if err := os.RemoveAll(filepath.Dir(src)); err != nil {
		return "", "", err
	}
	if err := os.CopyFS(src, os.DirFS(deploy.ChartDir(o.Root))); err != nil {
		return "", "", err
	}
	if err := pinDigest(filepath.Join(src, "values.yaml"), controller.Digest); err != nil {
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

// pinDigest sets image.digest in the chart's values.yaml: the released
// chart names the controller by the digest that was signed, and a registry
// override (image.registry) keeps the digest.
func pinDigest(values, digest string) error {
	data, err := os.ReadFile(values)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`(?m)^(image:\n(?:  .*\n|\s*#.*\n)*?  digest: )""$`)
	if !re.Match(data) {
		return fmt.Errorf("%s: no `digest: \"\"` under image:", values)
	}
	return os.WriteFile(values, re.ReplaceAll(data, []byte(`${1}"`+digest+`"`)), 0o644)
}
