package cluster

import "testing"

func TestTheKubernetesVersionKnobPicksAPinnedPatch(t *testing.T) {
	for in, want := range map[string]string{
		"":        "v1.37.2",
		"1.35":    "v1.35.4",
		"v1.36":   "v1.36.3",
		"1.37":    "v1.37.2",
		"v1.36.1": "v1.36.1",
	} {
		if got := kubernetesVersion(in); got != want {
			t.Errorf("kubernetesVersion(%q) = %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"1.3", "2.0", "latest"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("kubernetesVersion(%q) did not refuse", bad)
				}
			}()
			kubernetesVersion(bad)
		}()
	}
}

func TestRestartAllContainersIsOnByDefaultFrom136(t *testing.T) {
	defer func(v string) { KubernetesVersion = v }(KubernetesVersion)
	for v, want := range map[string]bool{"v1.35.4": false, "v1.36.3": true, "v1.37.2": true} {
		KubernetesVersion = v
		if got := RestartAllContainersByDefault(); got != want {
			t.Errorf("%s: %v, want %v", v, got, want)
		}
	}
}
