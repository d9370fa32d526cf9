package reconciler_test

import (
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The defaults keep their reasons: the daemon grace gives kruise-daemon more
// than the minute kruise itself gives it to answer a CRR, and the retry
// back-off's ceiling is above its base.
func TestDefaultsKeepTheirReasons(t *testing.T) {
	if reconciler.DefaultKruiseDaemonGrace <= time.Minute {
		t.Errorf("DefaultKruiseDaemonGrace %s, not more than kruise's one-minute response timeout", reconciler.DefaultKruiseDaemonGrace)
	}
	if reconciler.RetryMaxDelay <= reconciler.RetryBaseDelay || reconciler.RetryBaseDelay <= 0 {
		t.Errorf("retry delays base %s, max %s", reconciler.RetryBaseDelay, reconciler.RetryMaxDelay)
	}
}
