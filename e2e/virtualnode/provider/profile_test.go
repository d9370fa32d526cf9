package provider

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Each profile does with an image swap what its provider does: the kubelet-
// like ones restart the sidecar with the quick-exit image, which exits 0;
// ACI's and virtual-kubelet's mock providers leave it running its old image.
func TestProfileDecidesWhatAnImageSwapDoes(t *testing.T) {
	want := map[Profile]string{
		ProfileRestart: "Succeeded main=T:0/0 sidecar=T:0/1",
		ProfileECI:     "Succeeded main=T:0/0 sidecar=T:0/1",
		ProfileACI:     "Running main=T:0/0 sidecar=R/0",
		ProfileVKMock:  "Running main=T:0/0 sidecar=R/0",
	}
	for _, prof := range Profiles() {
		t.Run(string(prof), func(t *testing.T) {
			n := newNode(t)
			n.p.cfg.Profile = prof
			pod := jobPod(corev1.RestartPolicyNever, []string{"main", "--seconds", "1"}, DefaultWorkloadImage, []string{"sidecar", "--on-sigterm", "exit:0"})
			if err := n.p.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			n.run(time.Minute, map[time.Duration]func(){5 * time.Second: swapImage(t, n, pod, DefaultQuickExitImage)})
			last := n.last(t)
			if got := summary(last); got != want[prof] {
				t.Errorf("after the swap: %s, want %s", got, want[prof])
			}
			runs := DefaultWorkloadImage
			if prof.RestartsOnImageChange() {
				runs = DefaultQuickExitImage
			}
			if got := last.Status.ContainerStatuses[1].Image; got != runs {
				t.Errorf("the node reports the sidecar's image as %s, want %s", got, runs)
			}
		})
	}
}

// Each profile's node is recognised as the platform it plays.
func TestProfileNodesAreRecognisedAsTheirPlatform(t *testing.T) {
	want := map[Profile]decision.Platform{ProfileRestart: decision.PlatformVirtualKubelet, ProfileECI: decision.PlatformAlibabaECI,
		ProfileACI: decision.PlatformAzureACI, ProfileVKMock: decision.PlatformVirtualKubelet}
	for p, w := range want {
		if got := p.Platform(); got != w {
			t.Errorf("profile %s: platform %s, want %s", p, got, w)
		}
	}
}
