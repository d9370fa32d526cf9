package decision

import (
	"testing"
	"time"
)

// A plan's requeue is the earliest wait asked for, and a wait of zero or
// less is a second, never "no requeue" (which would leave the pod).
func TestRequeueKeepsTheEarliestAndNeverZero(t *testing.T) {
	var p Plan
	p.requeue(0)
	if p.RequeueAfter != time.Second {
		t.Errorf("requeue(0): %s, want 1s", p.RequeueAfter)
	}
	p = Plan{}
	p.requeue(time.Minute)
	p.requeue(-time.Second)
	p.requeue(time.Hour)
	if p.RequeueAfter != time.Second {
		t.Errorf("requeue(1m, -1s, 1h): %s, want 1s", p.RequeueAfter)
	}
}
