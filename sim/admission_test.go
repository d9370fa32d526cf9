package sim

import (
	"strings"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The webhook's conversion runs at admission in the simulator: the pods it
// accepts run their sidecars as native ones and finish with no write of the
// controller's; the virtual node's, the bad order's and those admitted with
// the webhook down are left to the kill path.
func TestNativeAdmissionConvertsWhatTheWebhookAcceptsAndNothingElse(t *testing.T) {
	sc, err := Lookup("native-admission")
	if err != nil {
		t.Fatal(err)
	}
	s := New(sc, 1, Options{Pods: 160})
	r := s.Run()
	if r.Violation != nil {
		t.Fatalf("%s", r.Violation)
	}
	convertible := map[string]bool{"nat-crr": true, "nat-of": true, "nat-order": true, "nat-ignore": true}
	converted := 0
	for _, e := range s.world.byUID {
		name := e.tmpl.Name
		moved := len(e.truth.native) > 0
		switch {
		case convertible[name] && !moved:
			t.Errorf("pod %s (%s) not converted: %s", e.obj.Name, name, e.obj.Annotations)
		case !convertible[name] && moved:
			t.Errorf("pod %s (%s) converted, want it left to the kill path", e.obj.Name, name)
		case moved:
			converted++
			if e.truth.crrs != 0 || e.truth.terminalAt.IsZero() {
				t.Errorf("converted pod %s: %d CRRs, terminal at %v; want none and finished", e.obj.Name, e.truth.crrs, e.truth.terminalAt)
			}
			for _, c := range e.obj.Spec.InitContainers {
				if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
					t.Errorf("converted pod %s: init container %s without restartPolicy Always", e.obj.Name, c.Name)
				}
			}
		case name != "nat-off" && e.truth.crrs == 0 && !strings.HasPrefix(name, "nat-vk"):
			t.Errorf("pod %s (%s) left to the kill path got no CRR", e.obj.Name, name)
		}
	}
	if converted == 0 || converted != r.Converted {
		t.Errorf("converted %d pods, the report says %d; want the same, above 0", converted, r.Converted)
	}
}

// The checker holds the controller to writing nothing for a pod whose
// sidecars are all native: a CRR for one is a violation.
func TestCheckerFlagsAWriteForAPodWhoseSidecarsAreAllNative(t *testing.T) {
	sc, err := Lookup("native-admission")
	if err != nil {
		t.Fatal(err)
	}
	sc.Templates = []Template{never("nat-crr", job(), sidecar("proxy", "exit:0", markCRR)).nativeOptIn()}
	s := New(sc, 1, Options{Pods: 1})
	s.Run()
	for _, e := range s.world.byUID {
		if !e.truth.allNative() {
			t.Fatalf("pod %s not converted", e.obj.Name)
		}
		crr := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
		crr.Spec.Containers = []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "proxy"}}
		s.check.crrCreated(crr, e)
	}
	if v := s.check.violation; v == nil || !strings.Contains(v.Message, "must ignore") {
		t.Fatalf("violation %v, want a CRR for a native-only pod flagged", v)
	}
}
