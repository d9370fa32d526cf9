package virtual

import (
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
)

// TestProviderProfiles runs a Job on the node of each provider profile
// (ECI swaps, ACI ignores the swap, virtual-kubelet's mock ignores it too)
// and checks the outcome the platform table promises, with the
// controller's writes from the audit log and the time from the main's exit.
func TestProviderProfiles(t *testing.T) {
	testenv.TestInParallel(t, cases.ProviderProfileFeatures(cases.VirtualNodeEnv{
		Timeout: 2 * time.Minute, ControllerWrites: controllerWrites})...)
}
