package provider

import (
	"fmt"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Profile is which real provider a mock node plays: what it does with an
// updated pod and what its node says of itself, each from that provider's
// own source.
type Profile string

const (
	// ProfileRestart is this project's own node: an image change restarts
	// the container, as a kubelet does. Its version names no provider, so
	// the controller sees a generic virtual-kubelet node that honours the
	// swap.
	ProfileRestart Profile = "restart"
	// ProfileECI plays Alibaba's ECI virtual node: the in-place image update
	// restarts the container (OpenKruise's SidecarTerminator design,
	// docs/proposals/20230130-job-sidecar-terminator.md, relies on it), and
	// the node reports Alibaba's kubelet build.
	ProfileECI Profile = "eci"
	// ProfileACI plays virtual-kubelet/azure-aci v1.6.4: UpdatePod is a
	// no-op (pkg/provider/aci.go, "ACI currently does not support live
	// updates of a pod"), and the node's kubeletVersion is
	// "<k8s>-vk-azure-aci-<build>" (cmd/virtual-kubelet/main.go).
	ProfileACI Profile = "aci"
	// ProfileVKMock plays virtual-kubelet's own mock provider (v1.14.1,
	// cmd/virtual-kubelet/internal/provider/mock/mock.go): UpdatePod stores
	// the new spec and notifies, and the containers run on unchanged.
	ProfileVKMock Profile = "vk-mock"
)

// Profiles lists every profile.
func Profiles() []Profile { return []Profile{ProfileRestart, ProfileECI, ProfileACI, ProfileVKMock} }

// ParseProfile reads a profile name.
func ParseProfile(s string) (Profile, error) {
	for _, p := range Profiles() {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown provider profile %q (known: %v)", s, Profiles())
}

// RestartsOnImageChange says whether the provider restarts a container
// whose image an update changed.
func (p Profile) RestartsOnImageChange() bool {
	return p == "" || p == ProfileRestart || p == ProfileECI
}

// KubeletVersion is what the node reports as status.nodeInfo.kubeletVersion.
func (p Profile) KubeletVersion() string {
	switch p {
	case ProfileECI:
		return "v1.16.9-aliyun.1"
	case ProfileACI:
		return "v1.25.0-vk-azure-aci-1.6.4"
	case ProfileVKMock:
		return "v1.14.1"
	}
	return "v1.35.4-mock"
}

// Platform is the platform the controller recognises the profile's node as
// (it carries type=virtual-kubelet, as every mock node does).
func (p Profile) Platform() decision.Platform {
	pl, _ := decision.PlatformOf(decision.NodeFacts{Labels: map[string]string{"type": "virtual-kubelet"}, KubeletVersion: p.KubeletVersion()}, true)
	return pl
}

// SplitNodeProfile reads "name" or "name=profile".
func SplitNodeProfile(s string) (string, Profile, error) {
	name, prof, ok := strings.Cut(s, "=")
	if !ok {
		return name, ProfileRestart, nil
	}
	p, err := ParseProfile(prof)
	return name, p, err
}
