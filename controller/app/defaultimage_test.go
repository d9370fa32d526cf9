package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// --default-quick-exit-image is checked at start like any other image: an
// image the allowlist does not allow, or not a valid reference, is an error,
// not pods left without a path later.
func TestDefaultQuickExitImageIsCheckedAtStart(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // error text; empty: accepted
		img  string // the policy's default image when accepted
	}{
		{args: nil, img: ""},
		{args: []string{"--default-quick-exit-image=ghcr.io/sidecar-terminator/quick-exit:v1"}, img: "ghcr.io/sidecar-terminator/quick-exit:v1"},
		{args: []string{"--default-quick-exit-image=example.com/exit:1"}, want: "is not allowed by --quick-exit-image-allowlist"},
		{args: []string{"--default-quick-exit-image=example.com/exit:1", "--quick-exit-image-allowlist=example.com/exit"}, img: "example.com/exit:1"},
		{args: []string{"--default-quick-exit-image=example.com/exit:1", "--quick-exit-image-allowlist="}, want: "is not allowed"},
		{args: []string{"--default-quick-exit-image=Not A Reference"}, want: "--default-quick-exit-image"},
	} {
		o := DefaultOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := o.ReconcilerConfig()
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		case tc.want == "" && err != nil:
			t.Errorf("%v: refused: %v", tc.args, err)
		case tc.want == "" && cfg.Policy.DefaultQuickExitImage != tc.img:
			t.Errorf("%v: policy's default image %q, want %q", tc.args, cfg.Policy.DefaultQuickExitImage, tc.img)
		}
	}
}
