package deploy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// image.registry moves the controller image to another registry (a mirror,
// or the one a release was pushed to) and keeps its path, tag and digest.
func TestImageRegistryReplacesTheRepositoryHost(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		args []string
		want string
	}{
		{nil, "ghcr.io/sidecar-terminator/controller:0.1.0"},
		{[]string{"--set", "image.registry=127.0.0.1:5000"}, "127.0.0.1:5000/sidecar-terminator/controller:0.1.0"},
		{[]string{"--set", "image.registry=mirror.example", "--set", "image.digest=" + digest}, "mirror.example/sidecar-terminator/controller@" + digest},
		// A repository with no registry host keeps all of its path.
		{[]string{"--set", "image.registry=localhost:5000", "--set", "image.repository=acme/st", "--set", "image.tag=v9"}, "localhost:5000/acme/st:v9"},
		{[]string{"--set", "image.registry=r.example", "--set", "image.repository=localhost/st"}, "r.example/st:0.1.0"},
	}
	for _, c := range cases {
		dep := typed[appsv1.Deployment](t, only(t, render(t, c.args...), "Deployment"))
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != c.want {
			t.Errorf("%v: image %q, want %q", c.args, got, c.want)
		}
	}
}

func TestImageRegistryMustBeAHost(t *testing.T) {
	for _, bad := range []string{"ghcr.io/acme", "https://r.example", "r.example:port"} {
		if _, err := Template(t.Context(), helmBinary(t), ChartDir(repoRoot(t)), "st-test", "--set", "image.registry="+bad); err == nil {
			t.Errorf("image.registry=%q accepted, want a schema error", bad)
		}
	}
}
