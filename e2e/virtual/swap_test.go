package virtual

import (
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
)

// TestImageSwapOnVirtualNodes runs each image-swap case (e2e/cases, shared
// with e2e/kubeconfig) as its own Job in its own namespace, all at once,
// checking every controller write against the audit log.
func TestImageSwapOnVirtualNodes(t *testing.T) {
	testenv.TestInParallel(t, cases.VirtualNodeFeatures(cases.VirtualNodeEnv{
		Timeout: 2 * time.Minute, ControllerWrites: controllerWrites})...)
}
